/* SPDX-License-Identifier: ISC */
/*
 * A test certificate authority made with OpenSSL at test time
 * (header-only): an EC P-256 key and a self-signed certificate, a CA or
 * not.
 */
#ifndef EGRESS_TESTS_CA_TEST_H
#define EGRESS_TESTS_CA_TEST_H

#include <time.h>

#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static inline void
ca_test_ext(X509 *x, int nid, const char *v)
{
	X509V3_CTX ctx;
	X509_EXTENSION *e;

	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &ctx, nid, v);
	cr_assert_not_null(e);
	cr_assert_eq(X509_add_ext(x, e, -1), 1);
	X509_EXTENSION_free(e);
}

/* A self-signed certificate for a new key (*ret_key), a CA when ca. */
static inline X509 *
ca_test_make(int ca, EVP_PKEY **ret_key)
{
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	X509 *x = X509_new();
	X509_NAME *n;

	cr_assert_not_null(k);
	cr_assert_not_null(x);
	cr_assert_eq(X509_set_version(x, 2), 1);
	cr_assert_eq(ASN1_INTEGER_set(X509_get_serialNumber(x), 7), 1);
	cr_assert_not_null(X509_gmtime_adj(X509_getm_notBefore(x), -7200));
	cr_assert_not_null(X509_gmtime_adj(X509_getm_notAfter(x), 2 * 86400));
	n = X509_get_subject_name(x);
	cr_assert_eq(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
			 (const unsigned char *)"test ca", -1, -1, 0),
	    1);
	cr_assert_eq(X509_set_issuer_name(x, n), 1);
	cr_assert_eq(X509_set_pubkey(x, k), 1);
	ca_test_ext(x, NID_basic_constraints,
	    ca ? "critical,CA:TRUE,pathlen:0" : "critical,CA:FALSE");
	if (ca)
		ca_test_ext(x, NID_key_usage, "critical,keyCertSign");
	ca_test_ext(x, NID_subject_key_identifier, "hash");
	cr_assert_gt(X509_sign(x, k, EVP_sha256()), 0);
	*ret_key = k;
	return x;
}

#endif /* EGRESS_TESTS_CA_TEST_H */
