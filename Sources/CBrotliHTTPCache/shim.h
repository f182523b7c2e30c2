// Brotli (RFC 7932; Debian: libbrotli-dev, Homebrew: brotli): the decoder for the `br` content
// coding HTTPClient decodes for apps, and the encoder the `dictionaries` benchmark measures
// against (the module links libbrotlidec only: the benchmark links libbrotlienc itself, so the
// CLI and apps do not load it). Debian 12's libbrotli is 1.0.9, which has no shared
// dictionaries (they came in 1.1.0), so the `dcb` coding of RFC 9842 §4 is neither made nor
// decoded here.
#include <brotli/decode.h>
#include <brotli/encode.h>
