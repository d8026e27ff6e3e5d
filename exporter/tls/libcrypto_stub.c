/* civetweb also dlopens the unversioned "libcrypto.so", which only exists where libssl-dev is
 * installed. This empty library, named libcrypto.so and linked against libcrypto.so.3, stands
 * in for that development symlink: dlsym on its handle searches its dependency libcrypto.so.3. */
int rdma_exporter_libcrypto_stub;
