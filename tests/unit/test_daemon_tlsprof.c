/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/tlsprof: one client context per profile, the
 * selection by (snapshot, instance, profile), the trust generations that
 * key pooled connections (distinct per context, kept across a reload
 * that changes nothing, new when a profile's file is rewritten), and a
 * context that fails to load.
 */
#include <openssl/x509.h>

#include "tests/unit/conf_test.h"

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/net/dial.h"
#include "broker/tlsprof.h"

TestSuite(daemon_tlsprof, .init = ct_mkdir, .fini = ct_rmdir);

/* Write a self-signed certificate of k to DIR/name. */
static void
write_cert(EVP_PKEY *k, const char *name, const char *cn)
{
	X509 *x = X509_new();
	X509_NAME *n;
	BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long len;

	cr_assert_not_null(x);
	cr_assert_not_null(b);
	cr_assert_eq(X509_set_version(x, 2), 1);
	cr_assert_eq(ASN1_INTEGER_set(X509_get_serialNumber(x), 1), 1);
	cr_assert_not_null(X509_gmtime_adj(X509_getm_notBefore(x), 0));
	cr_assert_not_null(X509_gmtime_adj(X509_getm_notAfter(x), 3600));
	cr_assert_eq(X509_set_pubkey(x, k), 1);
	n = X509_get_subject_name(x);
	cr_assert_eq(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
			 (const unsigned char *)cn, -1, -1, 0),
	    1);
	cr_assert_eq(X509_set_issuer_name(x, n), 1);
	cr_assert(X509_sign(x, k, EVP_sha256()) > 0);
	cr_assert_eq(PEM_write_bio_X509(b, x), 1);
	len = BIO_get_mem_data(b, &data);
	ct_write(name, data, (size_t)len);
	BIO_free(b);
	X509_free(x);
}

static const char conf_text[] =
    "[tls.profiles.a]\n"
    "ca_file = ca.crt\n"
    "cert_file = c.crt\n"
    "key_file = c.key\n"
    "[tls.profiles.b]\n"
    "ca_file = ca.crt\n"
    "alpn = postgresql\n"
    "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
    "tls_profiles = a\n"
    "[plugins.entries.y]\nplugin = y\nmanifest = m\n"
    "tls_profiles = a, b\n";

static struct conf_snapshot *
load(void)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(conf_load_buffer(ct_path("c.ini"), conf_text,
			 strlen(conf_text), &s, &e),
	    0, "%s", ct_errors(&e));
	return s;
}

static void
make_files(const char *cn)
{
	EVP_PKEY *k = ct_keygen("EC");

	write_cert(k, "ca.crt", cn);
	write_cert(k, "c.crt", cn);
	ct_write_privkey(k, "c.key");
	cr_assert_eq(chmod(ct_path("c.key"), 0600), 0);
	EVP_PKEY_free(k);
}

Test(daemon_tlsprof, select_and_generations)
{
	static struct broker b;
	struct conf_snapshot *s, *s2;
	const struct conf_instance *x, *y;
	struct dial_tls *ta = NULL, *tb = NULL, *t = NULL;
	uint64_t ga = 0, gb = 0, g = 0;

	make_files("one");
	s = load();
	x = conf_instance_find(s, "x");
	y = conf_instance_find(s, "y");
	cr_assert_eq(tlsprof_apply(&b, s), 0);
	cr_assert_eq(b.ntlsprofs, 2);

	/* Listed: its own context; not listed or unknown: refused. */
	cr_assert_eq(tlsprof_select(&b, s, y, "a", 1, &ta, &ga), 0);
	cr_assert_eq(tlsprof_select(&b, s, y, "b", 1, &tb, &gb), 0);
	cr_assert_not_null(ta);
	cr_assert_not_null(tb);
	cr_assert_neq(ta, tb);
	cr_assert_neq(ga, gb);
	cr_assert(tlsprof_trust_is_current(&b, ga));
	cr_assert_eq(tlsprof_select(&b, s, x, "b", 1, &t, &g),
	    EGRESS_ERR_INVALID_REQUEST);
	cr_assert_eq(tlsprof_select(&b, s, x, "nosuch", 6, &t, &g),
	    EGRESS_ERR_INVALID_REQUEST);
	cr_assert_eq(tlsprof_select(&b, s, NULL, "a", 1, &t, &g),
	    EGRESS_ERR_INVALID_REQUEST);
	cr_assert_eq(tlsprof_check(s, x, "a", 1), 0);
	cr_assert_eq(tlsprof_check(s, x, "", 0), 0);
	/* No profile: [tls], here not loaded. */
	cr_assert_eq(tlsprof_select(&b, s, x, "", 0, &t, &g),
	    EGRESS_ERR_TLS_FAILED);

	/* A reload that changes nothing keeps the contexts. */
	s2 = load();
	cr_assert_eq(tlsprof_apply(&b, s2), 0);
	cr_assert_eq(tlsprof_select(&b, s2, y, "a", 1, &t, &g), 0);
	cr_assert_eq(g, ga);
	cr_assert(tlsprof_trust_is_current(&b, ga));
	conf_snapshot_free(s);

	/* Rewritten files: a new context and generation for a and b (both
	 * name ca.crt); the old generation is no longer current. */
	make_files("two");
	s = load();
	y = conf_instance_find(s, "y");
	cr_assert_eq(tlsprof_apply(&b, s), 0);
	cr_assert_eq(tlsprof_select(&b, s, y, "a", 1, &t, &g), 0);
	cr_assert_neq(g, ga);
	cr_assert(!tlsprof_trust_is_current(&b, ga));
	cr_assert(!tlsprof_trust_is_current(&b, gb));
	cr_assert(tlsprof_trust_is_current(&b, g));

	/* The key file swapped after the configuration read it: the context
	 * is built from the key the configuration read and checked, never
	 * from the file's new bytes. */
	ct_write_str("c.key", "not a key\n");
	cr_assert_eq(tlsprof_apply(&b, s), 0);
	cr_assert_eq(tlsprof_select(&b, s, y, "a", 1, &t, &g), 0);

	/* A file that no longer loads: that profile fails with tls-failed
	 * (the configuration would refuse it; the broker still copes). */
	ct_write_str("c.crt", "not a certificate\n");
	cr_assert_neq(tlsprof_apply(&b, s), 0);
	cr_assert_eq(tlsprof_select(&b, s, y, "a", 1, &t, &g),
	    EGRESS_ERR_TLS_FAILED);
	cr_assert_eq(tlsprof_select(&b, s, y, "b", 1, &t, &g), 0);
	tlsprof_release(&b);
	cr_assert_eq(b.ntlsprofs, 0);
	conf_snapshot_free(s);
	conf_snapshot_free(s2);
}
