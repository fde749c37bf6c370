/* SPDX-License-Identifier: ISC */
/*
 * The inspection CA of tls_inspect entries (conf/inspect.c): loaded from
 * [tls] inspect_ca_cert and inspect_ca_key or their defaults in the
 * configuration's folder; refused, naming the file, when the key may be
 * read by its group or others, does not match, is missing, or the
 * certificate is no CA. Nothing is checked when no entry inspects. An
 * entry that inspects without granting http_client is refused at its
 * line.
 */
#include <stdio.h>
#include <sys/stat.h>

#include <criterion/criterion.h>
#include <openssl/pem.h>

#include <egress/error.h>

#include "ca_test.h"
#include "conf_test.h"

static void
write_ca(const char *cert, const char *key, int ca, int mode)
{
	EVP_PKEY *k = NULL;
	X509 *x = ca_test_make(ca, &k);
	FILE *f;

	cr_assert_not_null(f = fopen(cert, "w"));
	cr_assert_eq(PEM_write_X509(f, x), 1);
	(void)fclose(f);
	cr_assert_not_null(f = fopen(key, "w"));
	cr_assert_eq(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
	(void)fclose(f);
	cr_assert_eq(chmod(key, (mode_t)mode), 0);
	X509_free(x);
	EVP_PKEY_free(k);
}

static const char entry[] = "[plugins.entries.x]\nplugin = x\n"
			    "manifest = m\npermissions = http_client\n"
			    "tls_inspect = true\n";

/* Load text as DIR/c.ini; return the load's result, errors in *e. */
static int
load(const char *text, struct conf_errors *e)
{
	struct conf_snapshot *s = NULL;
	int rc;

	rc = conf_load_buffer(ct_path("c.ini"), text, strlen(text), &s, e);
	conf_snapshot_free(s);
	return rc;
}

static int
has_error(const struct conf_errors *e, const char *want)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		if (strstr(e->msgs[i], want) != NULL)
			return 1;
	return 0;
}

Test(conf_inspect, default_paths_and_key_mode, .init = ct_mkdir,
    .fini = ct_rmdir)
{
	struct conf_errors e = { 0 };
	char want[700];

	write_ca(ct_path("inspect-ca.pem"), ct_path("inspect-ca.key"), 1,
	    0600);
	(void)load(entry, &e);
	cr_expect(!has_error(&e, "inspect_ca"), "%s", ct_errors(&e));
	conf_errors_done(&e);

	cr_assert_eq(chmod(ct_path("inspect-ca.key"), 0640), 0);
	cr_expect_eq(load(entry, &e), EGRESS_ERR_INVALID);
	(void)snprintf(want, sizeof(want),
	    "c.ini:5: [tls] inspect_ca_key: %s is group- or world-accessible; "
	    "chmod 600 it",
	    ct_path("inspect-ca.key"));
	cr_expect(has_error(&e, want), "want %s\ngot %s", want, ct_errors(&e));
	conf_errors_done(&e);
}

/* Once the broker names its user, a CA key another user owns is refused
 * (that user may read it and mint certificates the clients trust). */
Test(conf_inspect, key_owned_by_another_user_than_the_broker, .init = ct_mkdir,
    .fini = ct_rmdir)
{
	struct conf_errors e = { 0 };
	char want[700];

	write_ca(ct_path("inspect-ca.pem"), ct_path("inspect-ca.key"), 1,
	    0600);
	conf_key_owner_require(geteuid());
	cr_expect_eq(load(entry, &e), 0, "%s", ct_errors(&e));
	conf_errors_done(&e);

	conf_key_owner_require(geteuid() + 1);
	cr_expect_eq(load(entry, &e), EGRESS_ERR_INVALID);
	(void)snprintf(want, sizeof(want),
	    "c.ini:5: [tls] inspect_ca_key: %s is owned by another user than "
	    "the broker's, who may read it; chown it to the broker's user",
	    ct_path("inspect-ca.key"));
	cr_expect(has_error(&e, want), "want %s\ngot %s", want, ct_errors(&e));
	conf_errors_done(&e);
}

Test(conf_inspect, named_paths_and_bad_files, .init = ct_mkdir,
    .fini = ct_rmdir)
{
	struct conf_errors e = { 0 };
	char text[1024];
	EVP_PKEY *k = NULL;
	X509 *x;
	FILE *f;

	(void)snprintf(text, sizeof(text),
	    "[tls]\ninspect_ca_cert = ca.pem\ninspect_ca_key = ca.key\n%s",
	    entry);
	/* Not a CA. */
	write_ca(ct_path("ca.pem"), ct_path("ca.key"), 0, 0600);
	cr_expect_eq(load(text, &e), EGRESS_ERR_INVALID);
	cr_expect(has_error(&e, "c.ini:2: [tls] inspect_ca_cert: "), "%s",
	    ct_errors(&e));
	cr_expect(has_error(&e, "is not a CA certificate"), "%s",
	    ct_errors(&e));
	conf_errors_done(&e);
	/* A CA, but the key of another. */
	write_ca(ct_path("ca.pem"), ct_path("ca.key"), 1, 0600);
	x = ca_test_make(1, &k);
	cr_assert_not_null(f = fopen(ct_path("ca.pem"), "w"));
	cr_assert_eq(PEM_write_X509(f, x), 1);
	(void)fclose(f);
	cr_expect_eq(load(text, &e), EGRESS_ERR_INVALID);
	cr_expect(has_error(&e, "c.ini:3: [tls] inspect_ca_key: "), "%s",
	    ct_errors(&e));
	cr_expect(has_error(&e, "does not match"), "%s", ct_errors(&e));
	conf_errors_done(&e);
	X509_free(x);
	EVP_PKEY_free(k);
}

Test(conf_inspect, unchecked_without_an_inspecting_entry, .init = ct_mkdir,
    .fini = ct_rmdir)
{
	struct conf_errors e = { 0 };

	(void)load("[tls]\ninspect_ca_cert = none.pem\n"
		   "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		   "tls_inspect = false\n",
	    &e);
	cr_expect(!has_error(&e, "inspect_ca"), "%s", ct_errors(&e));
	conf_errors_done(&e);
}

/* Every request inside an inspected tunnel is an http one: an entry
 * that inspects without http_client is refused, naming its line. */
Test(conf_inspect, needs_http_client, .init = ct_mkdir, .fini = ct_rmdir)
{
	struct conf_errors e = { 0 };

	write_ca(ct_path("inspect-ca.pem"), ct_path("inspect-ca.key"), 1,
	    0600);
	cr_expect_eq(load("[plugins.entries.x]\nplugin = x\nmanifest = m\n"
			  "permissions = socket_client\ntls_inspect = true\n",
			 &e),
	    EGRESS_ERR_INVALID);
	cr_expect(has_error(&e,
		      "c.ini:5: [plugins.entries.x] tls_inspect: true needs "
		      "http_client in permissions"),
	    "%s", ct_errors(&e));
	conf_errors_done(&e);
	(void)load(entry, &e); /* with http_client: not this error */
	cr_expect(!has_error(&e, "needs http_client"), "%s", ct_errors(&e));
	conf_errors_done(&e);
}
