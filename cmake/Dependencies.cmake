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
# libssl-dev: the server SSL_CTX and the prober's HMAC, in the dlopen()ed module of exporter/tls.
find_package(OpenSSL 3 REQUIRED)
# Optional: the workload collector's CRI and PodResources module (libgrpc++-dev,
# protobuf-compiler-grpc, libprotobuf-dev); without them it is not built.
pkg_check_modules(GRPCPP IMPORTED_TARGET grpc++)
pkg_check_modules(PROTOBUF IMPORTED_TARGET protobuf)
find_program(RDMA_PROTOC protoc)
find_program(RDMA_GRPC_CPP_PLUGIN grpc_cpp_plugin)
# The workload collector's Kubernetes API client: nlohmann-json3-dev (header-only: the PodList
# decoder in sources/cgroup) and libcurl4-openssl-dev (HTTPS, in its own dlopen()ed module).
find_package(nlohmann_json 3 REQUIRED)
find_package(CURL 7.85 REQUIRED)
