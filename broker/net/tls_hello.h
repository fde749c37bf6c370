/* SPDX-License-Identifier: ISC */
/*
 * tls_hello: a look at the first bytes a client sends into a tunnel,
 * before anything is relayed: are they a TLS ClientHello, and if so
 * which server name (SNI) does it ask for, and does it carry Encrypted
 * Client Hello (extension 0xfe0d, whose inner name cannot be checked)?
 * The ClientHello is parsed by OpenSSL itself (a server-side SSL object
 * on memory BIOs whose ClientHello callback reads the extensions and
 * aborts the handshake); nothing is answered to the client.
 */
#ifndef EGRESS_NET_TLS_HELLO_H
#define EGRESS_NET_TLS_HELLO_H

#include <stddef.h>
#include <stdint.h>

#define TLS_HELLO_MAX \
	(16384 + 5) /* one record: a bigger hello is
					 refused */
#define TLS_HELLO_SNI_MAX 255

enum tls_hello_status {
	TLS_HELLO_MORE = 0,    /* a ClientHello so far: read more */
	TLS_HELLO_NOT_TLS = 1, /* the bytes are not a TLS handshake */
	TLS_HELLO_OK = 2,      /* a whole ClientHello, read into the result */
	TLS_HELLO_BAD = 3,     /* a TLS record that is no valid ClientHello,
				  or one over TLS_HELLO_MAX */
};

/* What a ClientHello says. */
struct tls_hello {
	int has_sni;
	char sni[TLS_HELLO_SNI_MAX + 1]; /* NUL-terminated, as sent */
	int has_ech; /* an ECH or ESNI extension present (0xfe0d, the
		      * drafts' 0xfe08..0xfe0c and 0xff02, ESNI's
		      * 0xffce) */
};

/*
 * Look at the first n bytes a client sent. Return a tls_hello_status;
 * with TLS_HELLO_OK, *ret is written. A server name that is not one
 * host_name entry of printable ASCII is TLS_HELLO_BAD. Return
 * EGRESS_ERR_NOMEM when OpenSSL could not allocate.
 */
int tls_hello_peek(const uint8_t *buf, size_t n, struct tls_hello *ret);

/*
 * Answer whether server name sni equals host, ASCII case-insensitively,
 * with one trailing dot ignored on either side.
 */
int tls_hello_sni_is(const char *sni, const char *host);

#endif /* EGRESS_NET_TLS_HELLO_H */
