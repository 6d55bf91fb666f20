/* The server_name of a TLS ClientHello, read from the first bytes a client sends through
 * a CONNECT tunnel, so the proxy can hold the name it judged to the name the client
 * really asks the server for. No TLS library exposes a ClientHello parser for bytes it
 * does not terminate, so this is a small bounded reader (fuzzed: tests/fuzz/fuzz_sni.c). */
#ifndef SBX_EGRESS_SNI_H
#define SBX_EGRESS_SNI_H

#include <stddef.h>
#include <stdint.h>

/* A ClientHello must arrive whole in the first TLS record (at most 16 KiB + header). */
#define SNI_RECORD_MAX (5 + 16384)
#define SNI_NAME_MAX 255

/* 0: out holds the host_name (NUL-terminated, as sent); 1: more bytes needed; -EPROTO:
 * not a TLS ClientHello, or one this reader does not take (split across records);
 * -ENOENT: a ClientHello without a server_name. */
int sni_parse(const uint8_t *buf, size_t len, char out[SNI_NAME_MAX + 1]);

#endif
