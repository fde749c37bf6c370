/* SPDX-License-Identifier: ISC */
/*
 * [tls.profiles.NAME] and an entry's tls_profiles: what loads, and every
 * validation error with its file:line (files made at test time: an EC
 * key and a self-signed certificate, written by OpenSSL).
 */
#include <sys/stat.h>

#include <openssl/x509.h>

#include "conf_test.h"

TestSuite(conf_tlsprof, .init = ct_mkdir, .fini = ct_rmdir);

/* Write a self-signed certificate of k to DIR/name. */
static void
write_cert(EVP_PKEY *k, const char *name)
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
			 (const unsigned char *)"test", -1, -1, 0),
	    1);
	cr_assert_eq(X509_set_issuer_name(x, n), 1);
	cr_assert(X509_sign(x, k, EVP_sha256()) > 0);
	cr_assert_eq(PEM_write_bio_X509(b, x), 1);
	len = BIO_get_mem_data(b, &data);
	ct_write(name, data, (size_t)len);
	BIO_free(b);
	X509_free(x);
}

/* ca.crt, c.crt with c.key (0600), other.key (0600, another key). */
static void
make_files(void)
{
	EVP_PKEY *k = ct_keygen("EC"), *o = ct_keygen("EC");

	write_cert(k, "ca.crt");
	write_cert(k, "c.crt");
	ct_write_privkey(k, "c.key");
	cr_assert_eq(chmod(ct_path("c.key"), 0600), 0);
	ct_write_privkey(o, "other.key");
	cr_assert_eq(chmod(ct_path("other.key"), 0600), 0);
	EVP_PKEY_free(k);
	EVP_PKEY_free(o);
}

static int
load(const char *text, struct conf_snapshot **s, struct conf_errors *e)
{
	return conf_load_buffer(ct_path("c.ini"), text, strlen(text), s, e);
}

Test(conf_tlsprof, loads_and_entries_select)
{
	static const char text[] =
	    "[tls.profiles.mtls]\n"
	    "ca_file = ca.crt\n"
	    "cert_file = c.crt\n"
	    "key_file = c.key\n"
	    "min_version = TLSv1.3\n"
	    "alpn = h2, http/1.1\n"
	    "[tls.profiles.bare]\n"
	    "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
	    "tls_profiles = mtls\n"
	    "[plugins.entries.y]\nplugin = y\nmanifest = m\n";
	static const unsigned char alpn[] = "\x02h2\x08http/1.1";
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	const struct conf_tls_profile *p;
	const struct conf_instance *x, *y;
	size_t i;
	int seen = 0;

	make_files();
	cr_assert_eq(load(text, &s, &e), 0, "%s", ct_errors(&e));
	cr_assert_eq(s->ntls_profiles, 2);
	cr_expect_str_eq(s->tls_profiles[0].name, "bare"); /* sorted */
	p = conf_tls_profile_find(s, "mtls", 4);
	cr_assert_not_null(p);
	cr_expect_str_eq(p->ca_file, ct_path("ca.crt"));
	cr_expect_str_eq(p->cert_file, ct_path("c.crt"));
	cr_expect_str_eq(p->key_file, ct_path("c.key"));
	cr_expect_not_null(p->key); /* the key as read and checked */
	cr_expect_eq(p->min_version, 13);
	cr_assert_eq(p->alpn_len, sizeof(alpn) - 1);
	cr_expect_eq(memcmp(p->alpn, alpn, p->alpn_len), 0);
	p = conf_tls_profile_find(s, "bare", 4);
	cr_assert_not_null(p);
	cr_expect_null(p->ca_file);
	cr_expect_null(p->cert_file);
	cr_expect_null(p->key);
	cr_expect_eq(p->min_version, 12);
	cr_expect_eq(p->alpn_len, 0);
	cr_expect_null(conf_tls_profile_find(s, "mtl", 3));
	cr_expect_null(conf_tls_profile_find(s, "mtlsx", 5));
	x = conf_instance_find(s, "x");
	y = conf_instance_find(s, "y");
	cr_expect(conf_instance_has_tls_profile(x, "mtls", 4));
	cr_expect(!conf_instance_has_tls_profile(x, "bare", 4));
	cr_expect(!conf_instance_has_tls_profile(x, "mtls\0", 5));
	cr_expect(!conf_instance_has_tls_profile(y, "mtls", 4));
	cr_expect(!conf_instance_has_tls_profile(NULL, "mtls", 4));
	/* Rewriting a profile's file makes the snapshot stale. */
	for (i = 0; i < s->nfiles; i++)
		if (strcmp(s->files[i].path, ct_path("c.key")) == 0)
			seen = s->files[i].shared;
	cr_expect(seen, "the key file is tracked as a shared file");
	conf_snapshot_free(s);
}

/* Once the broker names its user, a key another user owns is refused
 * (that user may read it), whatever its mode. */
Test(conf_tlsprof, key_owned_by_another_user_than_the_broker)
{
	static const char text[] = "[tls.profiles.a]\ncert_file = c.crt\n"
				   "key_file = c.key\n";
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	char want[700];

	make_files();
	conf_key_owner_require(geteuid());
	cr_assert_eq(load(text, &s, &e), 0, "%s", ct_errors(&e));
	conf_snapshot_free(s);
	s = NULL;
	conf_errors_done(&e);

	conf_key_owner_require(geteuid() + 1);
	cr_expect_neq(load(text, &s, &e), 0);
	cr_expect_null(s);
	(void)snprintf(want, sizeof(want),
	    "%s:3: [tls.profiles.a] key_file: %s is owned by another user "
	    "than the broker's, who may read it; chown it to the broker's "
	    "user",
	    ct_path("c.ini"), ct_path("c.key"));
	cr_expect(e.n == 1 && strcmp(e.msgs[0], want) == 0, "want %s\ngot %s",
	    want, ct_errors(&e));
	conf_snapshot_free(s);
	conf_errors_done(&e);
}

struct bad_case {
	char text[400];
	char want[300]; /* after "DIR/c.ini:"; '@' stands for DIR */
};

Test(conf_tlsprof, every_error_names_file_and_line)
{
	static const struct bad_case cases[] = {
		{ "[tls.profiles]\n",
		    "1: [tls.profiles]: a profile needs a name: write "
		    "[tls.profiles.NAME]" },
		{ "[tls.profiles.Bad]\n",
		    "1: [tls.profiles.Bad]: 'Bad' is not a profile name" },
		{ "[tls.profiles.a]\n[tls.profiles.a]\n",
		    "2: [tls.profiles.a]: section given twice (first at line 1)" },
		{ "[tls.profiles.a]\nfoo = 1\n",
		    "2: [tls.profiles.a] foo: unknown key" },
		{ "[tls.profiles.a]\nca_file = nothere.crt\n",
		    "2: [tls.profiles.a] ca_file: @/nothere.crt: No such "
		    "file or directory" },
		{ "[tls.profiles.a]\nca_file = c.key\n",
		    "2: [tls.profiles.a] ca_file: @/c.key holds no PEM "
		    "certificate" },
		{ "[tls.profiles.a]\ncert_file = c.key\nkey_file = c.key\n",
		    "2: [tls.profiles.a] cert_file: @/c.key holds no PEM "
		    "certificate" },
		{ "[tls.profiles.a]\ncert_file = c.crt\n",
		    "2: [tls.profiles.a] cert_file: set without key_file; a "
		    "client certificate needs both cert_file and key_file" },
		{ "[tls.profiles.a]\nkey_file = c.key\n",
		    "2: [tls.profiles.a] key_file: set without cert_file; a "
		    "client certificate needs both cert_file and key_file" },
		{ "[tls.profiles.a]\ncert_file = c.crt\nkey_file = wide.key\n",
		    "3: [tls.profiles.a] key_file: @/wide.key is group- or "
		    "world-accessible; chmod 600 it" },
		{ "[tls.profiles.a]\ncert_file = c.crt\nkey_file = "
		  "other.key\n",
		    "3: [tls.profiles.a] key_file: @/other.key does not "
		    "match the certificate of cert_file" },
		{ "[tls.profiles.a]\ncert_file = c.crt\nkey_file = c.crt\n",
		    "3: [tls.profiles.a] key_file: @/c.crt is group- or "
		    "world-accessible; chmod 600 it" },
		{ "[tls.profiles.a]\ncert_file = c.crt\nkey_file = "
		  "notkey.key\n",
		    "3: [tls.profiles.a] key_file: @/notkey.key holds no "
		    "unencrypted PEM private key" },
		{ "[tls.profiles.a]\ncert_file = c.crt\nkey_file = link.key\n",
		    "3: [tls.profiles.a] key_file: @/link.key: Too many "
		    "levels of symbolic links" },
		{ "[tls.profiles.a]\ncert_file = c.crt\nkey_file = dir.key\n",
		    "3: [tls.profiles.a] key_file: @/dir.key is not a regular "
		    "file" },
		{ "[tls.profiles.a]\nmin_version = TLSv1.1\n",
		    "2: [tls.profiles.a] min_version: 'TLSv1.1' is not a "
		    "version; write TLSv1.2 (the default) or TLSv1.3" },
		{ "[tls.profiles.a]\nalpn = h2,\n  xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
		    "3: [tls.profiles.a] alpn: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' is not a protocol id" },
		{ "[tls.profiles.a]\nalpn = a b c d e f g h i j k l m n o p q\n",
		    "2: [tls.profiles.a] alpn: 17 protocols; at most 16" },
		{ "[tls.profiles.a]\n[plugins.entries.x]\nplugin = x\n"
		  "manifest = m\ntls_profiles = a,\n  b\n",
		    "6: [plugins.entries.x] tls_profiles: 'b' is not a "
		    "profile; define [tls.profiles.b] or remove it here" },
	};
	size_t i;

	make_files();
	ct_write_str("wide.key", "x");
	cr_assert_eq(chmod(ct_path("wide.key"), 0640), 0);
	ct_write_str("notkey.key", "not a key\n");
	cr_assert_eq(chmod(ct_path("notkey.key"), 0600), 0);
	cr_assert_eq(symlink(ct_path("c.key"), ct_path("link.key")), 0);
	cr_assert_eq(mkdir(ct_path("dir.key"), 0700), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct conf_snapshot *s = NULL;
		struct conf_errors e = { 0 };
		char want[600], full[700];
		size_t j;
		int found = 0;

		const char *at = strchr(cases[i].want, '@');

		if (at == NULL)
			(void)snprintf(want, sizeof(want), "%s",
			    cases[i].want);
		else
			(void)snprintf(want, sizeof(want), "%.*s%s%s",
			    (int)(at - cases[i].want), cases[i].want, ct_dir,
			    at + 1);
		(void)snprintf(full, sizeof(full), "%s:%s", ct_path("c.ini"),
		    want);
		cr_expect_neq(load(cases[i].text, &s, &e), 0, "case %zu", i);
		cr_expect_null(s, "case %zu", i);
		for (j = 0; j < e.n; j++)
			if (strncmp(e.msgs[j], full, strlen(full)) == 0)
				found = 1;
		cr_expect(found, "case %zu: want '%s', got:\n%s", i, full,
		    ct_errors(&e));
		/* A key's bytes never reach a message. */
		for (j = 0; j < e.n; j++)
			cr_expect_null(strstr(e.msgs[j], "PRIVATE"));
		conf_snapshot_free(s);
		conf_errors_done(&e);
	}
}
