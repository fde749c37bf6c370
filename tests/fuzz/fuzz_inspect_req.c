/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target: the requests inside an inspected tunnel, as the broker
 * takes them. The input's first line is the CONNECT authority; it is
 * parsed as the tunnel parses it (policy_hostport_parse), a leaf is made
 * for its host (broker/net/mint.c, a small cache shared across runs),
 * and the rest is the decrypted client stream: each head is parsed as
 * the proxy front parses it (http1_req.c), turned into the pipeline's
 * REQUEST as the front does inside an inspected tunnel
 * (http1_req_message() with the tunnel's authority, formatted as the
 * front formats it), and that REQUEST's authority and head are checked
 * as the pipeline checks them (policy_authority_parse,
 * http1_request_check). Invariants: nothing crashes; a leaf is made for
 * every host the tunnel accepts; only an origin-form head becomes a
 * REQUEST, always for https:// and the tunnel's own authority; a head
 * that passes the check carries at most one Host, and that Host names
 * the tunnel's host and port (the SNI the leaf was made for), never
 * another.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "broker/net/http1_head.h"
#include "broker/net/http1_req.h"
#include "broker/net/mint.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct mint *minter;

static struct mint *
fuzz_minter(void)
{
	EVP_PKEY *k;
	X509 *x;
	X509_NAME *n;

	if (minter != NULL)
		return minter;
	k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	x = X509_new();
	if (k == NULL || x == NULL)
		abort();
	n = X509_get_subject_name(x);
	if (X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
		(const unsigned char *)"fuzz ca", -1, -1, 0) != 1 ||
	    X509_set_issuer_name(x, n) != 1 || X509_set_pubkey(x, k) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(x), 0) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(x), 86400) == NULL ||
	    X509_sign(x, k, EVP_sha256()) <= 0 ||
	    mint_new(x, k, 4, &minter) != 0)
		abort();
	return minter;
}

/* A passed head's Host names dest exactly. */
static void
check_host(const struct policy_dest *dest, const struct http1_req *q)
{
	struct policy_dest hd;
	const char *v;
	size_t i, n, nhost = 0;

	for (i = 0; i < q->nheaders; i++) {
		if (!http1_header_is(&q->headers[i], "Host"))
			continue;
		nhost++;
		v = q->headers[i].value;
		n = q->headers[i].value_len;
		http1_trim(&v, &n);
		if (policy_authority_parse(v, n, 443, &hd, NULL) != 0 ||
		    hd.port != dest->port ||
		    strcasecmp(hd.host.name, dest->host.name) != 0)
			abort();
	}
	if (nhost > 1)
		abort();
}

/* The REQUEST m of an inspected tunnel for dest, as the pipeline takes
 * it: return 0 when its authority and head pass, -1 otherwise. */
static int
pipeline_check(const struct policy_dest *dest, const struct proto_msg *m)
{
	static struct http1_header in[PROTO_HEADERS_MAX];
	static struct http1_header kept[PROTO_HEADERS_MAX];
	struct policy_dest rd;
	struct http1_head h, out;

	if (m->request.scheme.len != 5 ||
	    memcmp(m->request.scheme.ptr, "https", 5) != 0)
		abort();
	if (policy_authority_parse(m->request.authority.ptr,
		m->request.authority.len, 443, &rd, NULL) != 0)
		abort(); /* the front formatted it from a parsed one */
	if (rd.port != dest->port ||
	    strcmp(rd.host.name, dest->host.name) != 0)
		abort();
	memcpy(rd.scheme, "https", 6);
	http1_req_head_of(m, in, &h);
	return http1_request_check(&rd, &h, kept, PROTO_HEADERS_MAX, &out,
	    NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http1_req q;
	static struct proto_msg m;
	char auth[POLICY_NAME_MAX + 16];
	const char *buf = (const char *)data, *nl;
	struct http1_req_refusal why;
	struct http1_req_parser *p;
	struct policy_dest dest;
	X509 *leaf = NULL;
	size_t off;
	long hl;
	int rc;

	if ((nl = memchr(buf, '\n', size)) == NULL)
		return 0;
	memset(&dest, 0, sizeof(dest));
	if (policy_hostport_parse(buf, (size_t)(nl - buf), &dest, NULL) != 0)
		return 0;
	memcpy(dest.scheme, "https", 6);
	if (http1_format_host(&dest, auth, sizeof(auth)) < 0)
		return 0; /* the front refuses to inspect it */
	if (mint_leaf(fuzz_minter(), dest.host.name, time(NULL), &leaf) != 0 ||
	    leaf == NULL)
		abort();
	off = (size_t)(nl - buf) + 1;
	if ((p = http1_req_parser_new()) == NULL)
		return 0;
	while (off < size) {
		hl = http1_req_head_len(buf + off, size - off, 0);
		if (hl <= 0 ||
		    http1_req_parse_head(p, buf + off, (size_t)hl, &q, NULL) !=
			0)
			break;
		off += (size_t)hl;
		rc = http1_req_message(&q, HTTP1_REQ_INSPECTED, auth, &m,
		    &why);
		if (rc != 0 && why.status != 400 && why.status != 431)
			abort();
		if (rc == 0 &&
		    (q.form != HTTP1_REQ_ORIGIN ||
			m.request.authority.ptr != auth ||
			m.request.authority.len != strlen(auth)))
			abort();
		if (rc != 0)
			break; /* answered, the connection closing */
		if (pipeline_check(&dest, &m) != 0)
			break;
		check_host(&dest, &q);
		if (q.chunked || q.content_length > 0)
			break; /* the body is the proxy fuzzer's */
	}
	http1_req_parser_free(p);
	return 0;
}
