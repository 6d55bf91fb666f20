#include "text.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util.h"

static size_t utf8_seq(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c == 0)
        return 0;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) {
        n = 2;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

bool sbx_utf8_valid(const char *buf, size_t len)
{
    const unsigned char *s = (const unsigned char *)buf;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_seq(s + i, len - i);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

size_t sbx_utf8_scrub(char *buf, size_t len)
{
    unsigned char *s = (unsigned char *)buf;
    size_t r = 0, w = 0;
    while (r < len) {
        size_t n = utf8_seq(s + r, len - r);
        if (n == 0) {
            r++;
            continue;
        }
        memmove(s + w, s + r, n);
        r += n;
        w += n;
    }
    return w;
}

char *sbx_utf8_lossy(const char *buf, size_t len)
{
    const unsigned char *s = (const unsigned char *)buf;
    char *out = sbx_xmalloc(len * 3 + 1), *w = out;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_seq(s + i, len - i);
        if (n == 0) {
            memcpy(w, "\xEF\xBF\xBD", 3);
            w += 3;
            i++;
            continue;
        }
        memcpy(w, s + i, n);
        w += n;
        i += n;
    }
    *w = '\0';
    return out;
}

size_t sbx_utf8_prefix(const char *buf, size_t len)
{
    /* Step back over at most three continuation bytes to a lead byte. */
    const unsigned char *s = (const unsigned char *)buf;
    size_t i = len;
    for (int k = 0; k < 4 && i > 0; k++) {
        unsigned char c = s[i - 1];
        if ((c & 0xC0) != 0x80) {
            /* Only a lead byte that can start a sequence is worth waiting for. */
            size_t need = c >= 0xC2 && c <= 0xDF   ? 2
                          : c >= 0xE0 && c <= 0xEF ? 3
                          : c >= 0xF0 && c <= 0xF4 ? 4
                                                   : 1;
            return (len - (i - 1) >= need) ? len : i - 1;
        }
        i--;
    }
    return len;
}

char *sbx_base64_encode(const void *buf, size_t len)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *in = buf;
    char *out = sbx_xmalloc(4 * ((len + 2) / 3) + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = tbl[v >> 18 & 63];
        out[o++] = tbl[v >> 12 & 63];
        out[o++] = i + 1 < len ? tbl[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? tbl[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

int sbx_base64_decode(const char *in, size_t len, unsigned char *out, size_t *out_len)
{
    while (len && in[len - 1] == '=')
        len--;
    if (len % 4 == 1)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(in[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    *out_len = o;
    return 0;
}

void sbx_hex(const unsigned char *in, size_t len, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = d[in[i] >> 4];
        out[2 * i + 1] = d[in[i] & 15];
    }
    out[2 * len] = '\0';
}

bool sbx_field_valid(const char *buf, size_t len, bool tab_ok)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        if ((c < 0x20 && !(tab_ok && c == '\t')) || c == 0x7f)
            return false;
    }
    return sbx_utf8_valid(buf, len);
}

void sbx_random_id(const char *prefix, size_t bytes, char *out, size_t size)
{
    unsigned char raw[32];
    size_t plen = strlen(prefix);
    if (bytes > sizeof(raw) || plen + 2 * bytes + 1 > size)
        abort();
    for (size_t got = 0; got < bytes;) {
        ssize_t n = getrandom(raw + got, bytes - got, 0);
        if (n < 0 && errno != EINTR)
            abort();
        got += n > 0 ? (size_t)n : 0;
    }
    memcpy(out, prefix, plen);
    sbx_hex(raw, bytes, out + plen);
}
