/* civetweb 1.15 (Debian) dlopens the unversioned "libssl.so" and looks up
 * SSL_get_peer_certificate, which OpenSSL 3 only provides as a macro for
 * SSL_get1_peer_certificate (civetweb issue #1334): the NULL function pointer crashes the
 * first TLS connection. This library is named libssl.so, depends on the real libssl.so.3
 * (so dlsym on its handle finds every other SSL_* symbol there) and adds the missing name.
 * rdma_exporter finds it first through its DT_RPATH (see CMakeLists.txt here). */
typedef struct x509_st X509;
typedef struct ssl_st SSL;
X509* SSL_get1_peer_certificate(const SSL* ssl);

/* OpenSSL 1.1 semantics differ (get0 vs get1: 1.1's function also took a reference), so the
 * caller's X509_free balances it exactly as it did with 1.1. */
X509* SSL_get_peer_certificate(const SSL* ssl) { return SSL_get1_peer_certificate(ssl); }
