/* SPDX-License-Identifier: ISC */
/*
 * The ClientHello peek (see tls_hello.h): OpenSSL's own parser, reached
 * through SSL_CTX_set_client_hello_cb() on a throw-away server-side SSL
 * object fed from a memory BIO; the callback copies what it needs with
 * SSL_client_hello_get0_ext() and stops the handshake there.
 */
#include <string.h>
#include <strings.h>

#include <egress/error.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "broker/net/tls_hello.h"

#define EXT_SERVER_NAME 0x0000

/* Encrypted Client Hello (RFC 9849: 0xfe0d), its drafts 8 to 12
 * (0xfe08..0xfe0c) and 6 to 7 (0xff02), and the ESNI drafts (0xffce):
 * each hides the name the client really asks for. */
static const unsigned ech_types[] = { 0xfe0d, 0xfe08, 0xfe09, 0xfe0a, 0xfe0b,
	0xfe0c, 0xff02, 0xffce };
#define NECH_TYPES (sizeof(ech_types) / sizeof(ech_types[0]))

struct peek {
	struct tls_hello *h;
	int seen; /* the callback ran */
	int bad;  /* the server name extension is malformed */
};

static int peek_index = -1;
static SSL_CTX *peek_ctx;

/* Read the one host_name of a server_name extension (RFC 6066, 3). */
static int
read_sni(const unsigned char *p, size_t n, struct tls_hello *h)
{
	size_t list, len, i;

	if (n < 2 || (list = (size_t)p[0] << 8 | p[1]) != n - 2 || list < 3)
		return -1;
	p += 2;
	if (p[0] != 0) /* host_name */
		return -1;
	len = (size_t)p[1] << 8 | p[2];
	if (len == 0 || len > TLS_HELLO_SNI_MAX || 3 + len != list)
		return -1; /* one name, nothing after it */
	for (i = 0; i < len; i++)
		if (p[3 + i] < 0x21 || p[3 + i] > 0x7e)
			return -1;
	memcpy(h->sni, p + 3, len);
	h->sni[len] = '\0';
	h->has_sni = 1;
	return 0;
}

static int
hello_cb(SSL *s, int *al, void *arg)
{
	struct peek *pk = SSL_get_ex_data(s, peek_index);
	const unsigned char *p;
	size_t n, i;

	(void)arg;
	if (pk == NULL)
		return SSL_CLIENT_HELLO_ERROR;
	pk->seen = 1;
	if (SSL_client_hello_get0_ext(s, EXT_SERVER_NAME, &p, &n) == 1 &&
	    read_sni(p, n, pk->h) != 0)
		pk->bad = 1;
	for (i = 0; i < NECH_TYPES; i++)
		if (SSL_client_hello_get0_ext(s, ech_types[i], &p, &n) == 1)
			pk->h->has_ech = 1;
	*al = SSL_AD_HANDSHAKE_FAILURE;
	return SSL_CLIENT_HELLO_ERROR; /* nothing more: stop here */
}

/* Registered so that OpenSSL collects the extension for the callback
 * (it keeps only the extensions it knows). */
static int
ech_parse_cb(SSL *s, unsigned int type, unsigned int context,
    const unsigned char *in, size_t inlen, X509 *x, size_t chainidx, int *al,
    void *arg)
{
	return 1;
}

static int
peek_init(void)
{
	size_t i;

	if (peek_ctx != NULL)
		return 0;
	if (peek_index < 0 &&
	    (peek_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0)
		return -1;
	if ((peek_ctx = SSL_CTX_new(TLS_server_method())) == NULL)
		return -1;
	/* Every version the library parses: the hello is only read. */
	(void)SSL_CTX_set_min_proto_version(peek_ctx, 0);
	for (i = 0; i < NECH_TYPES; i++)
		if (SSL_CTX_add_custom_ext(peek_ctx, ech_types[i],
			SSL_EXT_CLIENT_HELLO, NULL, NULL, NULL, ech_parse_cb,
			NULL) != 1) {
			SSL_CTX_free(peek_ctx);
			peek_ctx = NULL;
			return -1;
		}
	SSL_CTX_set_client_hello_cb(peek_ctx, hello_cb, NULL);
	return 0;
}

/*
 * Answer whether the n bytes at buf hold whole records up to the end of
 * the handshake message the first one starts (a client may split its
 * hello across records), or anything OpenSSL must judge: only then is a
 * handshake tried, so a hello sent a byte at a time costs one parse,
 * not one per read.
 */
static int
hello_complete(const uint8_t *buf, size_t n)
{
	uint8_t hdr[4];
	size_t pos = 0, got = 0, len, need = 0, i;

	if (n >= TLS_HELLO_MAX)
		return 1;
	while (pos + 5 <= n) {
		if (buf[pos] != 0x16)
			return 1; /* not a handshake record: OpenSSL's */
		len = (size_t)buf[pos + 3] << 8 | buf[pos + 4];
		if (pos + 5 + len > n)
			return 0; /* this record is not all there */
		for (i = 0; i < len && got + i < sizeof(hdr); i++)
			hdr[got + i] = buf[pos + 5 + i];
		got += len;
		pos += 5 + len;
		if (got >= sizeof(hdr)) {
			need = sizeof(hdr) +
			    ((size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 |
				hdr[3]);
			if (got >= need)
				return 1;
		}
	}
	return 0;
}

int
tls_hello_peek(const uint8_t *buf, size_t n, struct tls_hello *ret)
{
	struct tls_hello h;
	struct peek pk;
	SSL *s = NULL;
	BIO *rb = NULL, *wb = NULL;
	int rv, e, status = TLS_HELLO_BAD;

	if (n == 0)
		return TLS_HELLO_MORE;
	/* A handshake record of TLS 1.x; an SSLv2 hello is not served. */
	if (buf[0] != 0x16 || (n > 1 && buf[1] != 0x03))
		return TLS_HELLO_NOT_TLS;
	if (n < 6)
		return TLS_HELLO_MORE;
	if (buf[5] != 0x01) /* client_hello */
		return TLS_HELLO_BAD;
	if (!hello_complete(buf, n))
		return TLS_HELLO_MORE;
	if (peek_init() != 0)
		return EGRESS_ERR_NOMEM;
	memset(&h, 0, sizeof(h));
	memset(&pk, 0, sizeof(pk));
	pk.h = &h;
	if ((s = SSL_new(peek_ctx)) == NULL ||
	    (rb = BIO_new(BIO_s_mem())) == NULL ||
	    (wb = BIO_new(BIO_s_mem())) == NULL) {
		status = EGRESS_ERR_NOMEM;
		goto out;
	}
	if (BIO_write(rb, buf, (int)(n < TLS_HELLO_MAX ? n : TLS_HELLO_MAX)) <
	    0) {
		status = EGRESS_ERR_NOMEM;
		goto out;
	}
	BIO_set_mem_eof_return(rb, -1); /* no more yet: retry */
	SSL_set_bio(s, rb, wb);
	rb = wb = NULL;
	SSL_set_accept_state(s);
	(void)SSL_set_ex_data(s, peek_index, &pk);
	rv = SSL_do_handshake(s);
	e = SSL_get_error(s, rv);
	if (pk.seen)
		status = pk.bad ? TLS_HELLO_BAD : TLS_HELLO_OK;
	else if (e == SSL_ERROR_WANT_READ && n < TLS_HELLO_MAX)
		status = TLS_HELLO_MORE;
	if (status == TLS_HELLO_OK)
		*ret = h;
out:
	ERR_clear_error(); /* the aborted handshake's queue */
	BIO_free(rb);
	BIO_free(wb);
	SSL_free(s);
	return status;
}

/* Length of name without one trailing dot. */
static size_t
name_len(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && s[n - 1] == '.' ? n - 1 : n;
}

int
tls_hello_sni_is(const char *sni, const char *host)
{
	size_t a = name_len(sni), b = name_len(host);

	return a == b && a > 0 && strncasecmp(sni, host, a) == 0;
}
