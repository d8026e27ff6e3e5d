# Every dependency is a Debian bookworm package (scripts/install-deps.sh installs them).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(civetweb CONFIG REQUIRED)          # libcivetweb-dev: civetweb::civetweb
find_package(yaml-cpp CONFIG REQUIRED)          # libyaml-cpp-dev 0.7: target is plain `yaml-cpp`
find_package(spdlog CONFIG REQUIRED)            # libspdlog-dev (with external fmt 9)
find_package(fmt CONFIG REQUIRED)
# rdma-core ships pkg-config files only.
pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
pkg_check_modules(IBUMAD REQUIRED IMPORTED_TARGET libibumad)
pkg_check_modules(IBMAD REQUIRED IMPORTED_TARGET libibmad)
pkg_check_modules(IBNETDISC IMPORTED_TARGET libibnetdisc)
pkg_check_modules(MNL REQUIRED IMPORTED_TARGET libmnl)
