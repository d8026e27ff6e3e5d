# rdma_exporter container image: Debian bookworm, multi-stage.
#   docker build -t rdma-exporter:0.1.0 .
#   docker run --rm --network host -v /sys:/host/sys:ro rdma-exporter:0.1.0 --path.sysfs=/host/sys
# Kubernetes: deploy/kubernetes (docs/deployment.md).

# ---- build ------------------------------------------------------------------------------------
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config ccache \
      libibverbs-dev libibumad-dev libibmad-dev libibnetdisc-dev \
      libcivetweb-dev civetweb libyaml-cpp-dev libspdlog-dev libfmt-dev zlib1g-dev libmnl-dev libssl-dev libcrypt-dev \
      libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev \
      libcurl4-openssl-dev nlohmann-json3-dev \
 && rm -rf /var/lib/apt/lists/*
# ccache writes here; mount a cache on it to rebuild fast (tests/deploy/image_test.sh does).
ENV CCACHE_DIR=/ccache CCACHE_BASEDIR=/src
WORKDIR /src
# Only the sources and the docs the install rules ship (no build trees); without .git the revision
# label reads "unknown".
COPY CMakeLists.txt README.md /src/
COPY cmake /src/cmake
COPY sources /src/sources
COPY exporter /src/exporter
COPY collectors /src/collectors
COPY bench /src/bench
COPY deploy /src/deploy
COPY docs /src/docs
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=Release -DRDMA_EXPORTER_TESTS=OFF -DCMAKE_INSTALL_PREFIX=/usr \
 && cmake --build /build -j"$(nproc)" --target rdma_exporter \
 && DESTDIR=/out cmake --install /build --strip
# TLS: civetweb 1.15 dlopens an unversioned libssl.so and crashes with OpenSSL 3 (civetweb#1334).
# The build installs its shim (libssl.so, libcrypto.so) under /usr/lib/<triplet>/rdma_exporter, which the
# binary finds through its RPATH; the runtime stage copies it with the binary, so TLS works in the image.

# ---- runtime ----------------------------------------------------------------------------------
FROM debian:bookworm-slim
# Keep in sync with the NEEDED libraries of the binary and of its dlopen()ed modules (gRPC and
# protobuf: the workload collector's module; libcurl: its Kubernetes API module)
# (tests/deploy/dockerfile_test.sh checks it).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libibverbs1 ibverbs-providers libibumad3 libibmad5 libibnetdisc5 \
      libcivetweb1 libyaml-cpp0.7 libspdlog1.10 libfmt9 zlib1g libmnl0 libssl3 libcrypt1 \
      libgrpc++1.51 libgrpc29 libabsl20220623 libprotobuf32 \
      libcurl4 \
 && rm -rf /var/lib/apt/lists/*
# The binary and whatever it installs beside it (e.g. /usr/lib/<triplet>/rdma_exporter: the TLS shim).
COPY --from=build /out/usr/ /usr/
COPY deploy/rdma_exporter.yml /etc/rdma_exporter/rdma_exporter.yml
LABEL org.opencontainers.image.title="rdma_exporter" \
      org.opencontainers.image.description="Prometheus exporter for RDMA fabrics (InfiniBand, RoCE v2)"
# nobody: enough for sysfs; the rdma-devices Kubernetes overlay runs it as root for umad.
USER 65534:65534
EXPOSE 9661
ENTRYPOINT ["/usr/bin/rdma_exporter"]
CMD ["--config.file=/etc/rdma_exporter/rdma_exporter.yml"]
