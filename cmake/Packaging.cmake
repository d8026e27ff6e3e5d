# CPack: a Debian package with the binary, the systemd unit and the default configuration.
#   cmake --build build --target rdma_exporter && (cd build && cpack -G DEB)
# Installed paths: /usr/bin/rdma_exporter, /lib/systemd/system/rdma_exporter.service,
# /etc/rdma_exporter/rdma_exporter.yml (a conffile: local edits survive upgrades),
# /usr/share/doc/rdma-exporter/ (README.md, metrics, runbooks, deployment).
# Included from the root CMakeLists.txt after the install(TARGETS) of the binary.

# systemd's unit directory, as its pkg-config file names it (/lib/systemd/system on bookworm).
pkg_get_variable(RDMA_SYSTEMD_UNIT_DIR systemd systemdsystemunitdir)
if(NOT RDMA_SYSTEMD_UNIT_DIR)
  set(RDMA_SYSTEMD_UNIT_DIR /lib/systemd/system)
endif()
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/rdma_exporter.service
        DESTINATION ${RDMA_SYSTEMD_UNIT_DIR} COMPONENT Unspecified)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/rdma_exporter.yml
        DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/rdma_exporter COMPONENT Unspecified)
# README.md and deployment.md are what the unit's Documentation= names (deb_test.sh checks); the
# folder is the package's name, as Debian wants it.
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/metrics.md ${CMAKE_SOURCE_DIR}/docs/runbooks.md
              ${CMAKE_SOURCE_DIR}/docs/deployment.md
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/rdma-exporter COMPONENT Unspecified)

set(CPACK_GENERATOR "DEB" CACHE STRING "CPack generators")
set(CPACK_PACKAGE_NAME "rdma-exporter")
set(CPACK_PACKAGE_VENDOR "rdma_exporter")
set(CPACK_PACKAGE_CONTACT "rdma_exporter maintainers <rdma-exporter@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Prometheus exporter for RDMA fabrics (InfiniBand, RoCE v2)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
# /etc and /lib/systemd are absolute destinations: let the DEB generator place them as they are.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "Prometheus exporter for RDMA fabrics (InfiniBand, RoCE v2)\n rdma_exporter exports RDMA port counters, RoCE congestion signals, InfiniBand\n PMA counters and active RDMA latency probes for Prometheus.")
# Library dependencies from the binary's NEEDED entries (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-providers")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "prometheus, rdma-core, infiniband-diags")
set(_rdma_deb_dir ${CMAKE_BINARY_DIR}/deb-control)
file(MAKE_DIRECTORY ${_rdma_deb_dir})
file(WRITE ${_rdma_deb_dir}/conffiles "${CMAKE_INSTALL_FULL_SYSCONFDIR}/rdma_exporter/rdma_exporter.yml\n")
# No debhelper here: reload systemd after install/removal; enabling the service is left to the
# administrator (systemctl enable --now rdma_exporter), as for prometheus-node-exporter's users
# who deploy their own units.
file(WRITE ${_rdma_deb_dir}/postinst
"#!/bin/sh\nset -e\nif [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then\n  systemctl daemon-reload || true\nfi\nexit 0\n")
file(WRITE ${_rdma_deb_dir}/postrm
"#!/bin/sh\nset -e\nif [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then\n  systemctl daemon-reload || true\nfi\nexit 0\n")
file(CHMOD ${_rdma_deb_dir}/postinst ${_rdma_deb_dir}/postrm
     PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${_rdma_deb_dir}/conffiles ${_rdma_deb_dir}/postinst ${_rdma_deb_dir}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Package without building every target first (cpack needs only rdma_exporter, built before).
if(NOT DEFINED CMAKE_SKIP_INSTALL_ALL_DEPENDENCY)
  set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
endif()
include(CPack)
