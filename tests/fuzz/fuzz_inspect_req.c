/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target: the requests inside an inspected tunnel, as the broker
 * takes them. The input's first line is the CONNECT authority; it is
 * parsed as the tunnel parses it (policy_hostport_parse), a leaf is made
 * for its host (broker/net/mint.c, a small cache shared across runs),
 * and the rest is the decrypted client stream: each head is parsed as
 * the proxy front parses it (http1_req.c) and, in origin form, checked
 * for https://AUTHORITY as the pipeline checks it (http1_request_check).
 * Invariants: nothing crashes; a leaf is made for every host the tunnel
 * accepts; a head that passes the check carries at most one Host, and
 * that Host names the tunnel's host and port (the SNI the leaf was made
 * for), never another.
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

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http1_req q;
	static struct http1_header kept[HTTP1_REQ_HEADERS_MAX];
	const char *buf = (const char *)data, *nl;
	struct http1_req_parser *p;
	struct policy_dest dest;
	struct http1_head in, out;
	X509 *leaf = NULL;
	size_t off;
	long hl;

	if ((nl = memchr(buf, '\n', size)) == NULL)
		return 0;
	memset(&dest, 0, sizeof(dest));
	if (policy_hostport_parse(buf, (size_t)(nl - buf), &dest, NULL) != 0)
		return 0;
	memcpy(dest.scheme, "https", 6);
	if (mint_leaf(fuzz_minter(), dest.host.name, time(NULL), &leaf) != 0 ||
	    leaf == NULL)
		abort();
	off = (size_t)(nl - buf) + 1;
	if ((p = http1_req_parser_new()) == NULL)
		return 0;
	while (off < size) {
		hl = http1_req_head_len(buf + off, size - off);
		if (hl <= 0 ||
		    http1_req_parse_head(p, buf + off, (size_t)hl, &q, NULL) !=
			0)
			break;
		off += (size_t)hl;
		if (q.form != HTTP1_REQ_ORIGIN)
			break; /* refused inside an inspected tunnel */
		memset(&in, 0, sizeof(in));
		in.method = q.method;
		in.method_len = q.method_len;
		in.path = q.path;
		in.path_len = q.path_len;
		in.headers = q.headers;
		in.nheaders = q.nheaders;
		in.body_length = -1;
		if (http1_request_check(&dest, &in, kept,
			HTTP1_REQ_HEADERS_MAX, &out, NULL) != 0)
			break;
		check_host(&dest, &q);
		if (q.chunked || q.content_length > 0)
			break; /* the body is the proxy fuzzer's */
	}
	http1_req_parser_free(p);
	return 0;
}
