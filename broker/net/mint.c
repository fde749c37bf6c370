/* SPDX-License-Identifier: ISC */
/*
 * Leaf certificates for TLS inspection (see mint.h), made with OpenSSL's
 * X509 and EVP APIs.
 */
#include <arpa/inet.h>

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <egress/error.h>

#include "broker/net/mint.h"
#include "broker/net/readmore.h"

struct mint_leaf {
	char name[MINT_NAME_MAX + 1];
	X509 *cert;
	time_t not_after;
	unsigned long long used; /* the use counter when last handed out */
};

struct mint {
	X509 *ca;
	EVP_PKEY *ca_key;
	EVP_PKEY *key; /* every leaf's */
	SSL_CTX *ctx;  /* the server side, http/1.1 only */
	struct mint_leaf *leaves;
	size_t n, max;
	unsigned long long clock;
};

/* ALPN: http/1.1 when the client offers it, else none (HTTP/1.1 is what
 * a client without ALPN speaks). */
static int
mint_alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h1[] = "\x08http/1.1";
	unsigned char *sel = NULL;
	unsigned char sellen = 0;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&sel, &sellen, h1, sizeof(h1) - 1, in,
		inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	*outlen = sellen;
	return SSL_TLSEXT_ERR_OK;
}

int
mint_new(X509 *ca, EVP_PKEY *ca_key, size_t max, struct mint **ret)
{
	struct mint *m;
	int err = EGRESS_ERR_NOMEM;

	if ((m = calloc(1, sizeof(*m))) == NULL) {
		X509_free(ca);
		EVP_PKEY_free(ca_key);
		return EGRESS_ERR_NOMEM;
	}
	m->ca = ca;
	m->ca_key = ca_key;
	if (X509_check_private_key(ca, ca_key) != 1) {
		err = EGRESS_ERR_INVALID;
		goto out;
	}
	m->max = max > 0 ? max : 1;
	if ((m->leaves = calloc(m->max, sizeof(*m->leaves))) == NULL ||
	    (m->key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) == NULL ||
	    (m->ctx = SSL_CTX_new(TLS_server_method())) == NULL ||
	    SSL_CTX_set_min_proto_version(m->ctx, TLS1_2_VERSION) != 1)
		goto out;
	(void)SSL_CTX_set_options(m->ctx,
	    SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
	(void)SSL_CTX_set_session_cache_mode(m->ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_alpn_select_cb(m->ctx, mint_alpn_cb, NULL);
	*ret = m;
	m = NULL;
	err = 0;
out:
	ERR_clear_error();
	mint_free(m);
	return err;
}

/* The event callback bev carries while the filter is made: still there
 * after a failure, libevent's failure path did not free bev. */
static void
mint_unwrapped_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	(void)arg;
}

/*
 * libevent 2.1 frees ssl on every failure of the filter with
 * BEV_OPT_CLOSE_ON_FREE, and bev only on some (once the filter held a
 * reference to it). Hold a reference of our own meanwhile, and free bev
 * afterwards unless libevent did (it clears bev's callbacks when it
 * does): bev is freed once whatever failed.
 */
static struct bufferevent *
mint_filter(struct event_base *base, struct bufferevent *bev, SSL *ssl)
{
	bufferevent_event_cb ecb = NULL;
	struct bufferevent *tls;

	bufferevent_incref(bev);
	bufferevent_setcb(bev, NULL, NULL, mint_unwrapped_cb, NULL);
	tls = bufferevent_openssl_filter_new(base, bev, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (tls == NULL) {
		bufferevent_getcb(bev, NULL, NULL, &ecb, NULL);
		if (ecb == mint_unwrapped_cb)
			bufferevent_free(bev);
	} else {
		(void)readmore_bulk(bev);
		(void)readmore_bulk(tls);
	}
	(void)bufferevent_decref(bev);
	return tls;
}

int
mint_wrap(struct mint *m, struct event_base *base, struct bufferevent *bev,
    const char *name, time_t now, struct bufferevent **ret)
{
	struct bufferevent *tls;
	X509 *leaf = NULL;
	SSL *ssl;
	int err;

	if ((err = mint_leaf(m, name, now, &leaf)) != 0) {
		bufferevent_free(bev);
		return err;
	}
	if ((ssl = SSL_new(m->ctx)) == NULL ||
	    SSL_use_certificate(ssl, leaf) != 1 ||
	    SSL_use_PrivateKey(ssl, m->key) != 1) {
		ERR_clear_error();
		SSL_free(ssl);
		bufferevent_free(bev);
		return EGRESS_ERR_NOMEM;
	}
	if ((tls = mint_filter(base, bev, ssl)) == NULL) {
		ERR_clear_error();
		return EGRESS_ERR_NOMEM; /* ssl and bev are freed */
	}
	bufferevent_openssl_set_allow_dirty_shutdown(tls, 1);
	/* Timeouts are the filter's (its owner sets them). */
	(void)bufferevent_set_timeouts(bev, NULL, NULL);
	/* The filter writes records into bev only below this mark: beyond
	 * it the plaintext stays in the filter's output, where its owner
	 * sees it, and flows again once the socket drained bev. */
	bufferevent_setwatermark(bev, EV_WRITE, 0, MINT_UNDER_HIGH);
	(void)bufferevent_enable(bev, EV_READ | EV_WRITE);
	/* The ClientHello already read waits in bev's input: have the
	 * filter read it now rather than on the next bytes. */
	bufferevent_trigger(bev, EV_READ,
	    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
	*ret = tls;
	return 0;
}

static int
add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = e != NULL && X509_add_ext(x, e, -1) == 1;

	X509_EXTENSION_free(e);
	return ok;
}

/* subjectAltName: dNSName name, or iPAddress for a literal. */
static int
add_san(X509 *x, const char *name)
{
	unsigned char a[16];
	GENERAL_NAMES *gens = GENERAL_NAMES_new();
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_OCTET_STRING *ip = NULL;
	ASN1_IA5STRING *dns = NULL;
	int len = 0, ok = 0;

	if (gens == NULL || g == NULL)
		goto out;
	if (inet_pton(AF_INET, name, a) == 1)
		len = 4;
	else if (inet_pton(AF_INET6, name, a) == 1)
		len = 16;
	if (len > 0) {
		if ((ip = ASN1_OCTET_STRING_new()) == NULL ||
		    ASN1_OCTET_STRING_set(ip, a, len) != 1)
			goto out;
		GENERAL_NAME_set0_value(g, GEN_IPADD, ip);
		ip = NULL;
	} else {
		if ((dns = ASN1_IA5STRING_new()) == NULL ||
		    ASN1_STRING_set(dns, name, (int)strlen(name)) != 1)
			goto out;
		GENERAL_NAME_set0_value(g, GEN_DNS, dns);
		dns = NULL;
	}
	if (sk_GENERAL_NAME_push(gens, g) <= 0)
		goto out;
	g = NULL;
	ok = X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 1, 0) == 1;
out:
	ASN1_OCTET_STRING_free(ip);
	ASN1_IA5STRING_free(dns);
	GENERAL_NAME_free(g);
	GENERAL_NAMES_free(gens);
	return ok;
}

static X509 *
mint_make(struct mint *m, const char *name, time_t now)
{
	unsigned char serial[16];
	X509V3_CTX ctx;
	X509_NAME *subj = NULL;
	BIGNUM *bn = NULL;
	X509 *x = NULL;
	int ok = 0;

	if ((x = X509_new()) == NULL || X509_set_version(x, 2) != 1 ||
	    RAND_bytes(serial, sizeof(serial)) != 1)
		goto out;
	serial[0] &= 0x7f; /* positive */
	serial[0] |= 0x01; /* and not shortened */
	if ((bn = BN_bin2bn(serial, sizeof(serial), NULL)) == NULL ||
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL)
		goto out;
	if (X509_time_adj_ex(X509_getm_notBefore(x), 0, -MINT_BACKDATE_S,
		&now) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), 0,
		MINT_LIFETIME_S - MINT_BACKDATE_S, &now) == NULL)
		goto out;
	if ((subj = X509_NAME_new()) == NULL ||
	    (strlen(name) <= 64 &&
		X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC,
		    (const unsigned char *)name, -1, -1, 0) != 1) ||
	    X509_set_subject_name(x, subj) != 1 ||
	    X509_set_issuer_name(x, X509_get_subject_name(m->ca)) != 1 ||
	    X509_set_pubkey(x, m->key) != 1)
		goto out;
	X509V3_set_ctx(&ctx, m->ca, x, NULL, NULL, 0);
	if (!add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE") ||
	    !add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature") ||
	    !add_ext(x, &ctx, NID_ext_key_usage, "serverAuth") ||
	    !add_ext(x, &ctx, NID_subject_key_identifier, "hash") ||
	    /* A CA without a key identifier gets leaves without one. */
	    (X509_get0_subject_key_id(m->ca) != NULL &&
		!add_ext(x, &ctx, NID_authority_key_identifier, "keyid")) ||
	    !add_san(x, name))
		goto out;
	/* A digest for EC and RSA CAs; none for Ed25519. */
	if (X509_sign(x, m->ca_key,
		EVP_PKEY_get_id(m->ca_key) == EVP_PKEY_ED25519 ||
			EVP_PKEY_get_id(m->ca_key) == EVP_PKEY_ED448 ?
		    NULL :
		    EVP_sha256()) <= 0)
		goto out;
	ok = 1;
out:
	ERR_clear_error();
	BN_free(bn);
	X509_NAME_free(subj);
	if (!ok) {
		X509_free(x);
		return NULL;
	}
	return x;
}

int
mint_leaf(struct mint *m, const char *name, time_t now, X509 **ret)
{
	struct mint_leaf *l = NULL, *old = NULL;
	size_t i, len = strlen(name);
	X509 *x;

	if (len == 0 || len > MINT_NAME_MAX)
		return EGRESS_ERR_INVALID;
	m->clock++;
	for (i = 0; i < m->n; i++) {
		if (strcasecmp(m->leaves[i].name, name) == 0) {
			l = &m->leaves[i];
			break;
		}
		if (old == NULL || m->leaves[i].used < old->used)
			old = &m->leaves[i];
	}
	if (l != NULL && l->not_after - MINT_RENEW_S > now) {
		l->used = m->clock;
		*ret = l->cert;
		return 0;
	}
	if ((x = mint_make(m, name, now)) == NULL)
		return EGRESS_ERR_NOMEM;
	if (l == NULL) {
		/* A new slot, or the least recently used one. */
		l = m->n < m->max ? &m->leaves[m->n++] :
		    old != NULL	  ? old :
				    &m->leaves[0];
	}
	X509_free(l->cert);
	memcpy(l->name, name, len + 1);
	for (i = 0; i < len; i++)
		if (l->name[i] >= 'A' && l->name[i] <= 'Z')
			l->name[i] = (char)(l->name[i] - 'A' + 'a');
	l->cert = x;
	l->not_after = now - MINT_BACKDATE_S + MINT_LIFETIME_S;
	l->used = m->clock;
	*ret = x;
	return 0;
}

EVP_PKEY *
mint_key(const struct mint *m)
{
	return m->key;
}

X509 *
mint_ca(const struct mint *m)
{
	return m->ca;
}

size_t
mint_cached(const struct mint *m)
{
	return m->n;
}

void
mint_free(struct mint *m)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->n; i++)
		X509_free(m->leaves[i].cert);
	free(m->leaves);
	SSL_CTX_free(m->ctx);
	EVP_PKEY_free(m->key);
	EVP_PKEY_free(m->ca_key);
	X509_free(m->ca);
	free(m);
}
