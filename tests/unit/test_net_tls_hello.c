/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/tls_hello.c, the ClientHello peek: real
 * ClientHellos made by an OpenSSL client (with and without SNI, with an
 * Encrypted Client Hello extension added as a custom extension, TLS 1.2
 * only), read whole and byte by byte (MORE until the last byte), and
 * split across records of a few bytes each; HTTP
 * and other non-TLS bytes; a handshake record that is no ClientHello; a
 * server name that is not one printable host_name; and the name
 * comparison (case, one trailing dot).
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <egress/error.h>
#include <openssl/ssl.h>

#include "broker/net/tls_hello.h"

static int
add_ech(SSL *s, unsigned int type, unsigned int context,
    const unsigned char **out, size_t *outlen, X509 *x, size_t chainidx,
    int *al, void *arg)
{
	static const unsigned char body[] = { 0, 1, 2, 3 };

	*out = body;
	*outlen = sizeof(body);
	return 1;
}

/* A ClientHello from an OpenSSL client for sni (NULL: none), with an
 * extension of type ech (0: none). */
static size_t
make_hello(const char *sni, unsigned ech, int tls12, unsigned char *buf,
    size_t n)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *s;
	BIO *rb, *wb;
	int len;

	cr_assert_not_null(ctx);
	if (ech)
		cr_assert_eq(SSL_CTX_add_custom_ext(ctx, ech,
				 SSL_EXT_CLIENT_HELLO, add_ech, NULL, NULL,
				 NULL, NULL),
		    1);
	if (tls12)
		cr_assert_eq(SSL_CTX_set_max_proto_version(ctx,
				 TLS1_2_VERSION),
		    1);
	s = SSL_new(ctx);
	rb = BIO_new(BIO_s_mem());
	wb = BIO_new(BIO_s_mem());
	cr_assert(s != NULL && rb != NULL && wb != NULL);
	SSL_set_bio(s, rb, wb);
	if (sni != NULL)
		cr_assert_eq(SSL_set_tlsext_host_name(s, sni), 1);
	SSL_set_connect_state(s);
	cr_assert_eq(SSL_do_handshake(s), -1);
	len = BIO_read(wb, buf, (int)n);
	cr_assert_gt(len, 5);
	SSL_free(s);
	SSL_CTX_free(ctx);
	return (size_t)len;
}

static unsigned char H[TLS_HELLO_MAX];

Test(tls_hello, sni_read_whole_and_byte_by_byte)
{
	struct tls_hello h;
	size_t n = make_hello("API.Weather.example", 0, 0, H, sizeof(H)), i;

	memset(&h, 0, sizeof(h));
	cr_assert_eq(tls_hello_peek(H, n, &h), TLS_HELLO_OK);
	cr_assert(h.has_sni);
	cr_assert_str_eq(h.sni, "API.Weather.example");
	cr_assert_eq(h.has_ech, 0);
	for (i = 0; i < n; i++)
		cr_assert_eq(tls_hello_peek(H, i, &h), TLS_HELLO_MORE,
		    "prefix %zu of %zu", i, n);
}

/* The hello of H (n bytes, one record) split into records of at most
 * each bytes of handshake payload, written to out; return its length. */
static size_t
fragment(const unsigned char *h, size_t n, size_t each, unsigned char *out,
    size_t cap)
{
	size_t off = 5, k, len = 0;

	while (off < n) {
		k = n - off < each ? n - off : each;
		cr_assert_leq(len + 5 + k, cap);
		out[len] = 0x16;
		out[len + 1] = h[1];
		out[len + 2] = h[2];
		out[len + 3] = (unsigned char)(k >> 8);
		out[len + 4] = (unsigned char)k;
		memcpy(out + len + 5, h + off, k);
		len += 5 + k;
		off += k;
	}
	return len;
}

/* A hello split across records (as some clients send it) is read once
 * its last record is whole, and its name is the one sent; every shorter
 * prefix asks for more, whatever record boundary it ends on. */
Test(tls_hello, a_hello_across_records_is_read_once_whole)
{
	static unsigned char F[4 * TLS_HELLO_MAX];
	static const size_t sizes[] = { 1, 3, 7, 200 };
	struct tls_hello h;
	size_t n = make_hello("frag.example", 0, 0, H, sizeof(H)), m, i, k;

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		m = fragment(H, n, sizes[k], F, sizeof(F));
		if (m > TLS_HELLO_MAX)
			continue; /* over the peek's bound: not this test's */
		memset(&h, 0, sizeof(h));
		cr_assert_eq(tls_hello_peek(F, m, &h), TLS_HELLO_OK,
		    "records of %zu", sizes[k]);
		cr_assert(h.has_sni);
		cr_assert_str_eq(h.sni, "frag.example");
		for (i = 0; i < m; i++)
			cr_assert_eq(tls_hello_peek(F, i, &h), TLS_HELLO_MORE,
			    "records of %zu: prefix %zu of %zu", sizes[k], i,
			    m);
	}
}

Test(tls_hello, no_sni_tls12_and_ech)
{
	struct tls_hello h;
	size_t n;

	n = make_hello(NULL, 0, 0, H, sizeof(H));
	memset(&h, 0, sizeof(h));
	cr_assert_eq(tls_hello_peek(H, n, &h), TLS_HELLO_OK);
	cr_assert_eq(h.has_sni, 0);
	n = make_hello("a.example", 0, 1, H, sizeof(H));
	cr_assert_eq(tls_hello_peek(H, n, &h), TLS_HELLO_OK);
	cr_assert_str_eq(h.sni, "a.example");
	n = make_hello("cover.example", 0xfe0d, 0, H, sizeof(H));
	memset(&h, 0, sizeof(h));
	cr_assert_eq(tls_hello_peek(H, n, &h), TLS_HELLO_OK);
	cr_assert(h.has_ech, "the ECH extension was not seen");
	cr_assert_str_eq(h.sni, "cover.example");
}

/* The ECH drafts' and ESNI's code points hide the name as well; a
 * neighbouring unassigned one is just an extension. */
Test(tls_hello, ech_drafts_and_esni_are_seen)
{
	static const unsigned types[] = { 0xfe08, 0xfe09, 0xfe0a, 0xfe0b,
		0xfe0c, 0xff02, 0xffce };
	struct tls_hello h;
	size_t i, n;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		n = make_hello("cover.example", types[i], 0, H, sizeof(H));
		memset(&h, 0, sizeof(h));
		cr_assert_eq(tls_hello_peek(H, n, &h), TLS_HELLO_OK);
		cr_assert(h.has_ech, "0x%04x was not seen", types[i]);
	}
	n = make_hello("cover.example", 0xfe07, 0, H, sizeof(H));
	memset(&h, 0, sizeof(h));
	cr_assert_eq(tls_hello_peek(H, n, &h), TLS_HELLO_OK);
	cr_assert_eq(h.has_ech, 0);
}

Test(tls_hello, not_tls_and_bad)
{
	static const unsigned char http[] = "GET / HTTP/1.1\r\n\r\n";
	static const unsigned char ssh[] = "SSH-2.0-OpenSSH_9.2\r\n";
	static const unsigned char alert[] = { 0x15, 0x03, 0x03, 0, 2, 2, 40 };
	static const unsigned char server_hello[] = { 0x16, 0x03, 0x03, 0, 4,
		0x02, 0, 0, 0 };
	static const unsigned char sslv2[] = { 0x80, 0x2e, 0x01, 0x00, 0x02 };
	static const unsigned char garbage[] = { 0x16, 0x03, 0x01, 0x00, 0x08,
		0x01, 0x00, 0x00, 0x04, 0xff, 0xff, 0xff, 0xff };
	struct tls_hello h;

	cr_assert_eq(tls_hello_peek(http, sizeof(http) - 1, &h),
	    TLS_HELLO_NOT_TLS);
	cr_assert_eq(tls_hello_peek(ssh, sizeof(ssh) - 1, &h),
	    TLS_HELLO_NOT_TLS);
	cr_assert_eq(tls_hello_peek(alert, sizeof(alert), &h),
	    TLS_HELLO_NOT_TLS);
	cr_assert_eq(tls_hello_peek(sslv2, sizeof(sslv2), &h),
	    TLS_HELLO_NOT_TLS);
	cr_assert_eq(tls_hello_peek(server_hello, sizeof(server_hello), &h),
	    TLS_HELLO_BAD);
	cr_assert_eq(tls_hello_peek(garbage, sizeof(garbage), &h),
	    TLS_HELLO_BAD);
	cr_assert_eq(tls_hello_peek(http, 0, &h), TLS_HELLO_MORE);
}

/* Find the SNI host name's bytes in a hello made for name. */
static unsigned char *
find_name(unsigned char *buf, size_t n, const char *name)
{
	size_t k = strlen(name), i;

	for (i = 0; i + k <= n; i++)
		if (memcmp(buf + i, name, k) == 0)
			return buf + i;
	return NULL;
}

Test(tls_hello, server_name_must_be_printable)
{
	struct tls_hello h;
	size_t n = make_hello("abc.example", 0, 0, H, sizeof(H));
	unsigned char *p = find_name(H, n, "abc.example");

	cr_assert_not_null(p);
	p[1] = 0x00; /* a NUL inside the name */
	cr_assert_eq(tls_hello_peek(H, n, &h), TLS_HELLO_BAD);
	p[1] = ' ';
	cr_assert_eq(tls_hello_peek(H, n, &h), TLS_HELLO_BAD);
	p[-3] = 1; /* not host_name */
	p[1] = 'b';
	cr_assert_eq(tls_hello_peek(H, n, &h), TLS_HELLO_BAD);
}

Test(tls_hello, names_compare)
{
	cr_assert(tls_hello_sni_is("API.example", "api.example"));
	cr_assert(tls_hello_sni_is("api.example.", "api.example"));
	cr_assert(tls_hello_sni_is("api.example", "api.example."));
	cr_assert_not(tls_hello_sni_is("api.example..", "api.example"));
	cr_assert_not(tls_hello_sni_is("api.example", "api.example.org"));
	cr_assert_not(tls_hello_sni_is("xapi.example", "api.example"));
	cr_assert_not(tls_hello_sni_is("", ""));
	cr_assert_not(tls_hello_sni_is(".", ""));
}
