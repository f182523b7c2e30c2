// OpenSSL 3 (libssl and libcrypto) for CacheTLS and CacheCrypto, from Debian's libssl-dev or Homebrew's
// openssl@3. The function-like macros Swift cannot import are wrapped here as functions, and
// nothing else lives in this file. On Linux the functions called are COpenSSLLoaderHTTPCache's, which
// open OpenSSL on first use: every function called here must be one it defines.
#ifndef COPENSSL_HTTPCACHE_SHIM_H
#define COPENSSL_HTTPCACHE_SHIM_H

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/// SSL_CTX_set_min_proto_version: 1 on success.
static inline int copenssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

/// SSL_CTX_set_mode: the modes now set.
static inline long copenssl_ctx_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }

/// SSL_CTX_set_session_cache_mode: the previous mode.
static inline long copenssl_ctx_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

/// SSL_CTX_set_read_ahead.
static inline void copenssl_ctx_set_read_ahead(SSL_CTX *ctx, int yes) { SSL_CTX_set_read_ahead(ctx, yes); }

/// SSL_set_tlsext_host_name (SNI, RFC 6066 §3): 1 on success.
static inline int copenssl_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

/// SSL_OP_NO_RENEGOTIATION, a macro built with SSL_OP_BIT.
static inline uint64_t copenssl_op_no_renegotiation(void) { return SSL_OP_NO_RENEGOTIATION; }

/// SSL_OP_CIPHER_SERVER_PREFERENCE, a macro built with SSL_OP_BIT.
static inline uint64_t copenssl_op_cipher_server_preference(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }

/// SSL_OP_PRIORITIZE_CHACHA, a macro built with SSL_OP_BIT.
static inline uint64_t copenssl_op_prioritize_chacha(void) { return SSL_OP_PRIORITIZE_CHACHA; }

/// SSL_CTX_set_tlsext_servername_callback (SNI, RFC 6066 §3): 1 on success.
static inline long copenssl_ctx_set_tlsext_servername_callback(SSL_CTX *ctx, int (*callback)(SSL *, int *, void *)) {
    return SSL_CTX_set_tlsext_servername_callback(ctx, callback);
}

/// A new key on the named curve (e.g. "P-256"), or NULL: EVP_EC_gen's steps, since the variadic
/// EVP_PKEY_Q_keygen it expands to cannot be wrapped.
static inline EVP_PKEY *copenssl_ec_generate(const char *curve) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (context != NULL && EVP_PKEY_keygen_init(context) == 1 && EVP_PKEY_CTX_set_group_name(context, curve) == 1) {
        EVP_PKEY_generate(context, &key);
    }
    EVP_PKEY_CTX_free(context);
    return key;
}

#endif
