// OpenSSL opened when it is first needed (Linux). A program on this package (the `httpcache`
// CLI answering a hit from its store) needs neither TLS nor cryptography for most of what it
// does, and libssl and libcrypto linked in cost every start the dynamic loader's binding of
// their symbols (a quarter of a CLI hit's instructions: 15.3M with them, 11.7M without).
//
// So they are not linked: each OpenSSL function the package calls is defined here under its own
// name and prototype (checked by the compiler against OpenSSL's headers, included below), and
// its first call looks the real function up with dlsym in libssl.so.3 or libcrypto.so.3, opened
// then, and keeps the pointer. Callers do not change. The definitions are hidden: they bind the
// package's own calls and are never exported, so another library's OpenSSL calls (libcurl's,
// under FoundationNetworking) go to OpenSSL itself.
//
// A function the package starts calling needs its line below (the link fails with "undefined
// reference" until it has one): the prototype from the header, parameters named a0, a1, ….
// Macros and variadic functions cannot be wrapped; call the functions they expand to.
//
// When a library cannot be opened, httpcache_openssl_unavailable() says so and CacheTLS throws;
// a function called regardless (a digest, which cannot fail) writes that line to stderr and
// ends the process with status 1, as the dynamic loader would have at its start.
#include "COpenSSLLoaderHTTPCache.h"

#if defined(__APPLE__)
// OpenSSL is linked (Homebrew's openssl@3, through pkg-config).
const char *httpcache_openssl_unavailable(void) { return NULL; }
#else
#define _GNU_SOURCE
// The C library's headers that OpenSSL's include, first, so that the pragma below covers
// OpenSSL's declarations alone.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Everything OpenSSL's headers declare is hidden from here on, the definitions below too.
#pragma GCC visibility push(hidden)
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

enum library { LIBSSL, LIBCRYPTO };

// The files Debian's libssl3 installs; libssl's soname fixes OpenSSL 3's ABI.
static const char *const files[] = {"libssl.so.3", "libcrypto.so.3"};
static void *handles[2];
// Why a library could not be opened: one line, set once before its pthread_once returns.
static char failures[2][512];
static pthread_once_t opened[2] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};

static void open_library(enum library library) {
    // RTLD_LOCAL: OpenSSL's symbols do not join the global scope, where they could bind
    // another library's calls.
    handles[library] = dlopen(files[library], RTLD_NOW | RTLD_LOCAL);
    if (handles[library] == NULL) {
        snprintf(failures[library], sizeof failures[library],
                 "cannot load OpenSSL, which TLS, digests and encrypted stores need (%s): install it with "
                 "`apt-get install libssl3`",
                 dlerror());
    }
}
static void open_libssl(void) { open_library(LIBSSL); }
static void open_libcrypto(void) { open_library(LIBCRYPTO); }

// The library's failure text, or NULL once it is open.
static const char *open_once(enum library library) {
    pthread_once(&opened[library], library == LIBSSL ? open_libssl : open_libcrypto);
    return handles[library] == NULL ? failures[library] : NULL;
}

__attribute__((visibility("default"))) const char *httpcache_openssl_unavailable(void) {
    const char *failure = open_once(LIBCRYPTO);
    return failure != NULL ? failure : open_once(LIBSSL);
}

// Without the function the caller cannot go on: says why in one line and ends the process.
__attribute__((noreturn)) static void unavailable(const char *line) {
    dprintf(STDERR_FILENO, "%s: %s\n", program_invocation_short_name, line);
    _exit(EXIT_FAILURE);
}

// The function `name` of `library`, opening the library on first use.
static void *find(enum library library, const char *name) {
    const char *failure = open_once(library);
    if (failure != NULL) unavailable(failure);
    void *function = dlsym(handles[library], name);
    if (function == NULL) {
        char line[512];
        snprintf(line, sizeof line, "%s has no %s (%s): install OpenSSL 3 with `apt-get install libssl3`",
                 files[library], name, dlerror());
        unavailable(line);
    }
    return function;
}

// `function`, the real one, looked up on the first call; an atomic pointer per function, so that
// threads calling at once all get it (they may each look it up; dlsym gives them the same).
#define HTTPCACHE_OPENSSL_FIND(library, name)                                                           \
    static _Atomic(__typeof__(&name)) found;                                                            \
    __typeof__(&name) function = atomic_load_explicit(&found, memory_order_acquire);                    \
    if (function == NULL) {                                                                             \
        function = (__typeof__(&name))find(library, #name);                                             \
        atomic_store_explicit(&found, function, memory_order_release);                                  \
    }
#define HTTPCACHE_OPENSSL(library, type, name, parameters, arguments)                                   \
    type name parameters {                                                                              \
        HTTPCACHE_OPENSSL_FIND(library, name)                                                           \
        return function arguments;                                                                      \
    }
#define HTTPCACHE_OPENSSL_VOID(library, name, parameters, arguments)                                    \
    void name parameters {                                                                              \
        HTTPCACHE_OPENSSL_FIND(library, name)                                                           \
        function arguments;                                                                             \
    }

// libssl
HTTPCACHE_OPENSSL(LIBSSL, long, SSL_CTX_callback_ctrl, (SSL_CTX *a0, int a1, void (*a2)(void)), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBSSL, long, SSL_CTX_ctrl, (SSL_CTX *a0, int a1, long a2, void *a3), (a0, a1, a2, a3))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_CTX_free, (SSL_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, X509_STORE *, SSL_CTX_get_cert_store, (const SSL_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *a0), (a0))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_CTX_sess_set_new_cb,
    (SSL_CTX *a0, int (*a1)(struct ssl_st *, SSL_SESSION *)),
    (a0, a1))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_CTX_set_alpn_protos,
    (SSL_CTX *a0, const unsigned char *a1, unsigned int a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_CTX_set_alpn_select_cb,
    (SSL_CTX *a0, SSL_CTX_alpn_select_cb_func a1, void *a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_CTX_set_cert_cb, (SSL_CTX *a0, int (*a1)(SSL *, void *), void *a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_CTX_set_cipher_list, (SSL_CTX *a0, const char *a1), (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_CTX_set_client_hello_cb,
    (SSL_CTX *a0, SSL_client_hello_cb_fn a1, void *a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_CTX_set_default_verify_paths, (SSL_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, uint64_t, SSL_CTX_set_options, (SSL_CTX *a0, uint64_t a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_CTX_set_session_ticket_cb,
    (SSL_CTX *a0, SSL_CTX_generate_session_ticket_fn a1, SSL_CTX_decrypt_session_ticket_fn a2, void *a3),
    (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_CTX_set_tlsext_ticket_key_evp_cb,
    (SSL_CTX *a0, int (*a1)(SSL *, unsigned char *, unsigned char *, EVP_CIPHER_CTX *, EVP_MAC_CTX *, int)),
    (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_CTX_set_verify, (SSL_CTX *a0, int a1, SSL_verify_cb a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_CTX_use_cert_and_key,
    (SSL_CTX *a0, X509 *a1, EVP_PKEY *a2, struct stack_st_X509 *a3, int a4),
    (a0, a1, a2, a3, a4))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_SESSION_free, (SSL_SESSION *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, const char *, SSL_SESSION_get0_hostname, (const SSL_SESSION *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_SESSION_get_protocol_version, (const SSL_SESSION *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_SESSION_is_resumable, (const SSL_SESSION *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_client_hello_get0_ext,
    (SSL *a0, unsigned int a1, const unsigned char **a2, size_t *a3),
    (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBSSL, long, SSL_ctrl, (SSL *a0, int a1, long a2, void *a3), (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_do_handshake, (SSL *a0), (a0))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_free, (SSL *a0), (a0))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_get0_alpn_selected,
    (const SSL *a0, const unsigned char **a1, unsigned int *a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBSSL, X509_VERIFY_PARAM *, SSL_get0_param, (SSL *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_get_error, (const SSL *a0, int a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBSSL, void *, SSL_get_ex_data, (const SSL *a0, int a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_get_ex_data_X509_STORE_CTX_idx, (void), ())
HTTPCACHE_OPENSSL(LIBSSL, const char *, SSL_get_servername, (const SSL *a0, const int a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBSSL, long, SSL_get_verify_result, (const SSL *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, const char *, SSL_get_version, (const SSL *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_has_pending, (const SSL *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_is_init_finished, (const SSL *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, SSL *, SSL_new, (SSL_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_peek_ex, (SSL *a0, void *a1, size_t a2, size_t *a3), (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_pending, (const SSL *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_read_ex, (SSL *a0, void *a1, size_t a2, size_t *a3), (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_select_next_proto,
    (unsigned char **a0, unsigned char *a1, const unsigned char *a2, unsigned int a3, const unsigned char *a4,
         unsigned int a5),
    (a0, a1, a2, a3, a4, a5))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_session_reused, (const SSL *a0), (a0))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_set_accept_state, (SSL *a0), (a0))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_set_bio, (SSL *a0, BIO *a1, BIO *a2), (a0, a1, a2))
HTTPCACHE_OPENSSL_VOID(LIBSSL, SSL_set_connect_state, (SSL *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_set_ex_data, (SSL *a0, int a1, void *a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_set_session, (SSL *a0, SSL_SESSION *a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_shutdown, (SSL *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_use_cert_and_key,
    (SSL *a0, X509 *a1, EVP_PKEY *a2, struct stack_st_X509 *a3, int a4),
    (a0, a1, a2, a3, a4))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_version, (const SSL *a0), (a0))
HTTPCACHE_OPENSSL(LIBSSL, int, SSL_write_ex, (SSL *a0, const void *a1, size_t a2, size_t *a3), (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBSSL, const SSL_METHOD *, TLS_client_method, (void), ())
HTTPCACHE_OPENSSL(LIBSSL, const SSL_METHOD *, TLS_server_method, (void), ())

// libcrypto
HTTPCACHE_OPENSSL(LIBCRYPTO, int, ASN1_INTEGER_set, (ASN1_INTEGER *a0, long a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, const unsigned char *, ASN1_STRING_get0_data, (const ASN1_STRING *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, ASN1_STRING_length, (const ASN1_STRING *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, ASN1_TIME_to_tm, (const ASN1_TIME *a0, struct tm *a1), (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, BIO_clear_flags, (BIO *a0, int a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, BIO_free, (BIO *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, void *, BIO_get_data, (BIO *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, BIO_get_new_index, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, BIO_METHOD *, BIO_meth_new, (int a0, const char *a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, BIO_meth_set_create, (BIO_METHOD *a0, int (*a1)(BIO *)), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, BIO_meth_set_ctrl, (BIO_METHOD *a0, long (*a1)(BIO *, int, long, void *)), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, BIO_meth_set_destroy, (BIO_METHOD *a0, int (*a1)(BIO *)), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, BIO_meth_set_read, (BIO_METHOD *a0, int (*a1)(BIO *, char *, int)), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, BIO_meth_set_write, (BIO_METHOD *a0, int (*a1)(BIO *, const char *, int)), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, BIO *, BIO_new, (const BIO_METHOD *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, BIO *, BIO_new_file, (const char *a0, const char *a1), (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, BIO_set_data, (BIO *a0, void *a1), (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, BIO_set_flags, (BIO *a0, int a1), (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, BIO_set_init, (BIO *a0, int a1), (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, ERR_clear_error, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, unsigned long, ERR_get_error, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, unsigned long, ERR_peek_error, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, const char *, ERR_reason_error_string, (unsigned long a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_CIPHER_CTX_ctrl, (EVP_CIPHER_CTX *a0, int a1, int a2, void *a3), (a0, a1, a2, a3))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, EVP_CIPHER_CTX_free, (EVP_CIPHER_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, EVP_CIPHER_CTX *, EVP_CIPHER_CTX_new, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, EVP_CIPHER *, EVP_CIPHER_fetch,
    (OSSL_LIB_CTX *a0, const char *a1, const char *a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_CIPHER_get_iv_length, (const EVP_CIPHER *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_CipherInit_ex2,
    (EVP_CIPHER_CTX *a0, const EVP_CIPHER *a1, const unsigned char *a2, const unsigned char *a3, int a4,
         const OSSL_PARAM *a5),
    (a0, a1, a2, a3, a4, a5))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_CipherUpdate,
    (EVP_CIPHER_CTX *a0, unsigned char *a1, int *a2, const unsigned char *a3, int a4),
    (a0, a1, a2, a3, a4))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_DecryptFinal_ex, (EVP_CIPHER_CTX *a0, unsigned char *a1, int *a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_DecryptInit_ex,
    (EVP_CIPHER_CTX *a0, const EVP_CIPHER *a1, ENGINE *a2, const unsigned char *a3, const unsigned char *a4),
    (a0, a1, a2, a3, a4))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_DecryptUpdate,
    (EVP_CIPHER_CTX *a0, unsigned char *a1, int *a2, const unsigned char *a3, int a4),
    (a0, a1, a2, a3, a4))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_DigestFinal_ex,
    (EVP_MD_CTX *a0, unsigned char *a1, unsigned int *a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_DigestInit_ex, (EVP_MD_CTX *a0, const EVP_MD *a1, ENGINE *a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_DigestUpdate, (EVP_MD_CTX *a0, const void *a1, size_t a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_EncryptFinal_ex, (EVP_CIPHER_CTX *a0, unsigned char *a1, int *a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_EncryptInit_ex,
    (EVP_CIPHER_CTX *a0, const EVP_CIPHER *a1, ENGINE *a2, const unsigned char *a3, const unsigned char *a4),
    (a0, a1, a2, a3, a4))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_EncryptUpdate,
    (EVP_CIPHER_CTX *a0, unsigned char *a1, int *a2, const unsigned char *a3, int a4),
    (a0, a1, a2, a3, a4))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, EVP_MAC_CTX_free, (EVP_MAC_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, EVP_MAC_CTX *, EVP_MAC_CTX_new, (EVP_MAC *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_MAC_CTX_set_params, (EVP_MAC_CTX *a0, const OSSL_PARAM *a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, EVP_MAC *, EVP_MAC_fetch, (OSSL_LIB_CTX *a0, const char *a1, const char *a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_MAC_final,
    (EVP_MAC_CTX *a0, unsigned char *a1, size_t *a2, size_t a3),
    (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_MAC_init,
    (EVP_MAC_CTX *a0, const unsigned char *a1, size_t a2, const OSSL_PARAM *a3),
    (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_MAC_update, (EVP_MAC_CTX *a0, const unsigned char *a1, size_t a2), (a0, a1, a2))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, EVP_MD_CTX_free, (EVP_MD_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, EVP_MD_CTX *, EVP_MD_CTX_new, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, EVP_MD *, EVP_MD_fetch, (OSSL_LIB_CTX *a0, const char *a1, const char *a2), (a0, a1, a2))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, EVP_PKEY_CTX_free, (EVP_PKEY_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, EVP_PKEY_CTX *, EVP_PKEY_CTX_new_from_name,
    (OSSL_LIB_CTX *a0, const char *a1, const char *a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_PKEY_CTX_set_group_name, (EVP_PKEY_CTX *a0, const char *a1), (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, EVP_PKEY_free, (EVP_PKEY *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_PKEY_generate, (EVP_PKEY_CTX *a0, EVP_PKEY **a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, EVP_PKEY_keygen_init, (EVP_PKEY_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, const EVP_CIPHER *, EVP_aes_256_cbc, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, const EVP_MD *, EVP_sha256, (void), ())
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, GENERAL_NAMES_free, (GENERAL_NAMES *a0), (a0))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, OPENSSL_cleanse, (void *a0, size_t a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, OPENSSL_STACK *, OPENSSL_sk_new_null, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, int, OPENSSL_sk_num, (const OPENSSL_STACK *a0), (a0))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, OPENSSL_sk_pop_free, (OPENSSL_STACK *a0, void (*a1)(void *)), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, OPENSSL_sk_push, (OPENSSL_STACK *a0, const void *a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, void *, OPENSSL_sk_value, (const OPENSSL_STACK *a0, int a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, OSSL_PARAM, OSSL_PARAM_construct_end, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, OSSL_PARAM, OSSL_PARAM_construct_octet_string,
    (const char *a0, void *a1, size_t a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, OSSL_PARAM, OSSL_PARAM_construct_utf8_string,
    (const char *a0, char *a1, size_t a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, EVP_PKEY *, PEM_read_bio_PrivateKey,
    (BIO *a0, EVP_PKEY **a1, pem_password_cb *a2, void *a3),
    (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBCRYPTO, X509 *, PEM_read_bio_X509,
    (BIO *a0, X509 **a1, pem_password_cb *a2, void *a3),
    (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, PEM_write_bio_PrivateKey,
    (BIO *a0, const EVP_PKEY *a1, const EVP_CIPHER *a2, const unsigned char *a3, int a4, pem_password_cb *a5,
         void *a6),
    (a0, a1, a2, a3, a4, a5, a6))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, PEM_write_bio_X509, (BIO *a0, const X509 *a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, RAND_bytes, (unsigned char *a0, int a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, X509_EXTENSION *, X509V3_EXT_conf_nid,
    (struct lhash_st_CONF_VALUE *a0, X509V3_CTX *a1, int a2, const char *a3),
    (a0, a1, a2, a3))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, X509V3_set_ctx,
    (X509V3_CTX *a0, X509 *a1, X509 *a2, X509_REQ *a3, X509_CRL *a4, int a5),
    (a0, a1, a2, a3, a4, a5))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, X509_EXTENSION_free, (X509_EXTENSION *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, ASN1_STRING *, X509_NAME_ENTRY_get_data, (const X509_NAME_ENTRY *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_NAME_add_entry_by_txt,
    (X509_NAME *a0, const char *a1, int a2, const unsigned char *a3, int a4, int a5, int a6),
    (a0, a1, a2, a3, a4, a5, a6))
HTTPCACHE_OPENSSL(LIBCRYPTO, X509_NAME_ENTRY *, X509_NAME_get_entry, (const X509_NAME *a0, int a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_NAME_get_index_by_NID, (const X509_NAME *a0, int a1, int a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, char *, X509_NAME_oneline, (const X509_NAME *a0, char *a1, int a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, X509 *, X509_STORE_CTX_get_current_cert, (const X509_STORE_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_STORE_CTX_get_error, (const X509_STORE_CTX *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, void *, X509_STORE_CTX_get_ex_data, (const X509_STORE_CTX *a0, int a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_STORE_add_cert, (X509_STORE *a0, X509 *a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_VERIFY_PARAM_set1_host,
    (X509_VERIFY_PARAM *a0, const char *a1, size_t a2),
    (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_VERIFY_PARAM_set1_ip_asc, (X509_VERIFY_PARAM *a0, const char *a1), (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, X509_VERIFY_PARAM_set_hostflags, (X509_VERIFY_PARAM *a0, unsigned int a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_add_ext, (X509 *a0, X509_EXTENSION *a1, int a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_check_host,
    (X509 *a0, const char *a1, size_t a2, unsigned int a3, char **a4),
    (a0, a1, a2, a3, a4))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_check_issued, (X509 *a0, X509 *a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_check_private_key, (const X509 *a0, const EVP_PKEY *a1), (a0, a1))
HTTPCACHE_OPENSSL_VOID(LIBCRYPTO, X509_free, (X509 *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, const ASN1_TIME *, X509_get0_notAfter, (const X509 *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, const ASN1_TIME *, X509_get0_notBefore, (const X509 *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, void *, X509_get_ext_d2i, (const X509 *a0, int a1, int *a2, int *a3), (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBCRYPTO, X509_NAME *, X509_get_issuer_name, (const X509 *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, ASN1_INTEGER *, X509_get_serialNumber, (X509 *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, X509_NAME *, X509_get_subject_name, (const X509 *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, ASN1_TIME *, X509_getm_notAfter, (const X509 *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, ASN1_TIME *, X509_getm_notBefore, (const X509 *a0), (a0))
HTTPCACHE_OPENSSL(LIBCRYPTO, X509 *, X509_new, (void), ())
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_set_issuer_name, (X509 *a0, const X509_NAME *a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_set_pubkey, (X509 *a0, EVP_PKEY *a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_set_version, (X509 *a0, long a1), (a0, a1))
HTTPCACHE_OPENSSL(LIBCRYPTO, int, X509_sign, (X509 *a0, EVP_PKEY *a1, const EVP_MD *a2), (a0, a1, a2))
HTTPCACHE_OPENSSL(LIBCRYPTO, ASN1_TIME *, X509_time_adj_ex,
    (ASN1_TIME *a0, int a1, long a2, time_t *a3),
    (a0, a1, a2, a3))
HTTPCACHE_OPENSSL(LIBCRYPTO, const char *, X509_verify_cert_error_string, (long a0), (a0))

#pragma GCC visibility pop
#endif
