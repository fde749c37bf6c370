/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for manifests (conf/manifest.c): the fields and their
 * defaults, every error with its line, unknown sections and keys, the
 * bounds (64 KiB, 1,024 hosts, names and versions), and the signature
 * decision under each signature_mode: good, tampered (also in [egress]),
 * wrong key, unsigned and malformed, through conf_manifest_parse and
 * through conf_manifest_load with a real manifest.ini.sig beside it.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "conf/conf.h"
#include "conf_test.h"

static const char good[] =
    "[plugin]\n"
    "name = weather\n"
    "version = 1.4.0\n"
    "permissions = http_client\n"
    "[egress]\n"
    "hosts = api.weather.example, *.tiles.weather.example\n"
    "operator_defined = false\n";

static int
parse(const char *text, struct conf_manifest **m, struct conf_errors *e)
{
	return conf_manifest_parse("m.ini", text, strlen(text), NULL, 0,
	    CONF_SIG_PERMISSIVE, NULL, m, e);
}

Test(conf_manifest, good_manifest_fields)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(parse(good, &m, &e), 0, "%s", ct_errors(&e));
	cr_expect_str_eq(m->path, "m.ini");
	cr_expect_str_eq(m->name, "weather");
	cr_expect_str_eq(m->version, "1.4.0");
	cr_expect_eq(m->permissions, POLICY_PERM_HTTP_CLIENT);
	cr_expect_eq(policy_grant_count(m->hosts), 2);
	cr_expect_eq(m->operator_defined, 0);
	cr_expect_eq(m->sig, CONF_SIG_UNSIGNED);
	cr_expect_eq(m->name_line, 2);
	conf_manifest_free(m);
}

Test(conf_manifest, defaults_without_egress)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(parse("[plugin]\nname = n\nversion = 1\n", &m, &e), 0,
	    "%s", ct_errors(&e));
	cr_expect_eq(m->permissions, 0);
	cr_assert_not_null(m->hosts);
	cr_expect_eq(policy_grant_count(m->hosts), 0);
	cr_expect_eq(m->operator_defined, 0);
	conf_manifest_free(m);
}

Test(conf_manifest, operator_defined_with_hosts)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(
	    parse(
		"[plugin]\nname = gitea\nversion = 2\npermissions ="
		" http_client websocket_client\n[egress]\noperator_defined = true\n"
		"hosts = gitea.example\n",
		&m, &e),
	    0, "%s", ct_errors(&e));
	cr_expect_eq(m->operator_defined, 1);
	cr_expect_eq(m->permissions,
	    POLICY_PERM_HTTP_CLIENT | POLICY_PERM_WEBSOCKET_CLIENT);
	cr_expect_eq(policy_grant_count(m->hosts), 1);
	conf_manifest_free(m);
}

Test(conf_manifest, sha256_of_the_bytes)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	unsigned char want[32];

	cr_assert_eq(parse(good, &m, &e), 0);
	cr_assert_eq(EVP_Digest(good, strlen(good), want, NULL, EVP_sha256(),
			 NULL),
	    1);
	cr_expect_eq(memcmp(m->sha256, want, 32), 0);
	conf_manifest_free(m);
}

/* ---- Errors ------------------------------------------------------------ */

struct err_case {
	char in[300];
	char msg[300]; /* one of the messages, exactly */
};

ParameterizedTestParameters(conf_manifest, errors)
{
	static struct err_case cases[] = {
		{ "",
		    "m.ini:1: [plugin]: missing section; a manifest starts with "
		    "[plugin] and its name and version" },
		{ "[plugin]\nversion = 1\n",
		    "m.ini:1: [plugin] name: missing; add 'name = PLUGIN'" },
		{ "[plugin]\nname = a\n",
		    "m.ini:1: [plugin] version: missing; add 'version = 1.0.0'" },
		{ "[plugin]\nname = a\nversion = 1\n[extra]\n",
		    "m.ini:4: [extra]: unknown section; a manifest has [plugin] "
		    "and [egress]" },
		{ "[plugin]\nname = a\nversion = 1\nauthor = me\n",
		    "m.ini:4: [plugin] author: unknown key; [plugin] takes: name, "
		    "version, permissions" },
		{ "[plugin]\nname = a\nname = b\nversion = 1\n",
		    "m.ini:3: [plugin] name: given twice (first at line 2); keep "
		    "one" },
		{ "[plugin]\nname = Weather\nversion = 1\n",
		    "m.ini:2: [plugin] name: 'Weather' is not a plugin name: 1 "
		    "to 64 bytes of a-z, 0-9, '.', '_', '-', starting with a "
		    "letter or digit, without '..'" },
		{ "[plugin]\nname = ../x\nversion = 1\n",
		    "m.ini:2: [plugin] name: '../x' is not a plugin name: 1 to "
		    "64 bytes of a-z, 0-9, '.', '_', '-', starting with a letter "
		    "or digit, without '..'" },
		{ "[plugin]\nname = a\nversion = 1/2\n",
		    "m.ini:3: [plugin] version: '1/2' is not a version: 1 to 64 "
		    "bytes of letters, digits, '.', '_', '-', '+', '~', starting "
		    "with a letter or digit, without '..'" },
		{ "[plugin]\nname = a\nversion = 1..2\n",
		    "m.ini:3: [plugin] version: '1..2' is not a version: 1 to 64 "
		    "bytes of letters, digits, '.', '_', '-', '+', '~', starting "
		    "with a letter or digit, without '..'" },
		{ "[plugin]\nname = a\nversion = 1\npermissions = http_client\n"
		  "  raw_socket\n",
		    "m.ini:5: [plugin] permissions: unknown permission "
		    "'raw_socket'; write http_client, websocket_client or "
		    "socket_client" },
		{ "[plugin]\nname = a\nversion = 1\n[egress]\n"
		  "operator_defined = yes\n",
		    "m.ini:5: [egress] operator_defined: 'yes'; write true or "
		    "false" },
		{ "[plugin]\nname = a\nversion = 1\n[egress]\nhosts = a.example,"
		  "\n",
		    "m.ini:5: [egress] hosts: empty item after the last ','; "
		    "remove the trailing comma (an indented continuation line "
		    "needs none)" },
		{ "[plugin]\nname = a\nversion = 1\n[egress]\nhosts = a.example\n"
		  "  *\n",
		    "m.ini:6: [egress] hosts: '*': " },
		{ "[plugin]\nname = a\nversion = 1\n[egress]\nhosts = *.co.uk\n",
		    "m.ini:5: [egress] hosts: '*.co.uk': " },
		{ "[plugin]\nname = a\nversion = 1\n[egress]\nhosts = A.example\n",
		    "m.ini:5: [egress] hosts: 'A.example': " },
		{ "[plugin]\nname = a\nversion = 1\n[plugin]\n",
		    "m.ini:4: [plugin]: section given twice (first at line 1); "
		    "merge the two" },
	};

	return cr_make_param_array(struct err_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct err_case *c, conf_manifest, errors)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	size_t i, n = strlen(c->msg);
	int found = 0;

	cr_assert_eq(parse(c->in, &m, &e), EGRESS_ERR_INVALID, "%s", c->in);
	cr_expect_null(m);
	/* A message ending in ": " is checked as a prefix (the rest is the
	 * entry grammar's own wording, tested in policy/). */
	for (i = 0; i < e.n; i++)
		if (c->msg[n - 1] == ' ' ? strncmp(e.msgs[i], c->msg, n) == 0 :
					   strcmp(e.msgs[i], c->msg) == 0)
			found = 1;
	cr_expect(found, "want: %s\ngot:\n%s", c->msg, ct_errors(&e));
	conf_errors_done(&e);
}

Test(conf_manifest, every_bad_host_is_named)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(parse("[plugin]\nname = a\nversion = 1\n[egress]\n"
			   "hosts = ok.example *\n  x..y ok2.example\n",
			 &m, &e),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(e.n, 2, "%s", ct_errors(&e));
	cr_expect(ct_has_error(&e, "m.ini:5: [egress] hosts: '*': "));
	cr_expect(ct_has_error(&e, "m.ini:6: [egress] hosts: 'x..y': "));
	conf_errors_done(&e);
}

/* ---- Bounds ------------------------------------------------------------ */

static char *
manifest_with_hosts(size_t nhosts)
{
	char *s = malloc(64 + nhosts * 32);
	size_t i, off;

	cr_assert_not_null(s);
	off = (size_t)sprintf(s,
	    "[plugin]\nname = a\nversion = 1\n[egress]\n"
	    "hosts =\n");
	for (i = 0; i < nhosts; i++)
		off += (size_t)sprintf(s + off, "  h%zu.example\n", i);
	return s;
}

Test(conf_manifest, hosts_1024_accepted_1025_refused)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	char *s;

	s = manifest_with_hosts(CONF_MANIFEST_HOSTS_MAX);
	cr_assert_eq(parse(s, &m, &e), 0, "%s", ct_errors(&e));
	cr_expect_eq(policy_grant_count(m->hosts), CONF_MANIFEST_HOSTS_MAX);
	conf_manifest_free(m);
	m = NULL;
	free(s);

	s = manifest_with_hosts(CONF_MANIFEST_HOSTS_MAX + 1);
	cr_assert_eq(parse(s, &m, &e), EGRESS_ERR_INVALID);
	cr_expect_null(m);
	cr_assert_eq(e.n, 1);
	cr_expect_str_eq(e.msgs[0],
	    "m.ini:5: [egress] hosts: 1025 hosts; a "
	    "manifest may declare at most 1024");
	conf_errors_done(&e);
	free(s);
}

Test(conf_manifest, size_64k_accepted_65k_refused)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	size_t len = CONF_MANIFEST_MAX, off;
	char *s = malloc(65 * 1024 + 1);

	cr_assert_not_null(s);
	/* Exactly 64 KiB: the manifest, then comment lines. */
	off = (size_t)sprintf(s, "[plugin]\nname = a\nversion = 1\n");
	while (off < len) {
		size_t n = len - off > 100 ? 100 : len - off;

		memset(s + off, ';', n - 1);
		s[off + n - 1] = '\n';
		off += n;
	}
	cr_assert_eq(conf_manifest_parse("m.ini", s, len, NULL, 0,
			 CONF_SIG_PERMISSIVE, NULL, &m, &e),
	    0, "%s", ct_errors(&e));
	conf_manifest_free(m);
	m = NULL;

	memset(s + len, ';', 1024);
	s[65 * 1024 - 1] = '\n';
	cr_assert_eq(conf_manifest_parse("m.ini", s, 65 * 1024, NULL, 0,
			 CONF_SIG_PERMISSIVE, NULL, &m, &e),
	    EGRESS_ERR_TOO_BIG);
	cr_expect_null(m);
	cr_assert_eq(e.n, 1);
	cr_expect_str_eq(e.msgs[0],
	    "m.ini: manifest is 66560 bytes; at most "
	    "65536 are allowed");
	conf_errors_done(&e);
	free(s);
}

Test(conf_manifest, long_strings_refused_not_truncated)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	char s[512], name[80];

	memset(name, 'a', 65);
	name[65] = '\0';
	(void)snprintf(s, sizeof(s), "[plugin]\nname = %s\nversion = 1\n",
	    name);
	cr_assert_eq(parse(s, &m, &e), EGRESS_ERR_INVALID);
	cr_expect(ct_has_error(&e, "m.ini:2: [plugin] name: 'aaaa"));
	conf_errors_done(&e);
	name[64] = '\0';
	(void)snprintf(s, sizeof(s), "[plugin]\nname = %s\nversion = %s\n",
	    name, name);
	cr_assert_eq(parse(s, &m, &e), 0, "%s", ct_errors(&e));
	cr_expect_eq(strlen(m->name), 64);
	conf_manifest_free(m);
}

/* ---- Signatures under each mode ------------------------------------------ */

enum sig_kind {
	SK_GOOD = 1,		/* signed by the trusted key */
	SK_TAMPERED = 2,	/* signed, then one byte of [egress] changed */
	SK_WRONG_KEY = 3,	/* signed by an untrusted key */
	SK_UNSIGNED = 4,	/* no .sig */
	SK_MALFORMED = 5,	/* a .sig that is not one line of base64 */
	SK_TAMPERED_PLUGIN = 6, /* one byte of [plugin] changed */
};

struct mode_case {
	int kind;
	int mode;
	int accepted;
	int status;    /* m->sig when accepted */
	char msg[160]; /* a substring of the refusal */
};

static struct mode_case mode_cases[] = {
	{ SK_GOOD, CONF_SIG_STRICT, 1, CONF_SIG_VALID, "" },
	{ SK_GOOD, CONF_SIG_PERMISSIVE, 1, CONF_SIG_VALID, "" },
	{ SK_GOOD, CONF_SIG_DISABLED, 1, CONF_SIG_NOT_CHECKED, "" },
	{ SK_TAMPERED, CONF_SIG_STRICT, 0, 0, "untrusted signature" },
	{ SK_TAMPERED, CONF_SIG_PERMISSIVE, 0, 0, "untrusted signature" },
	{ SK_TAMPERED, CONF_SIG_DISABLED, 1, CONF_SIG_NOT_CHECKED, "" },
	{ SK_TAMPERED_PLUGIN, CONF_SIG_PERMISSIVE, 0, 0,
	    "untrusted signature" },
	{ SK_WRONG_KEY, CONF_SIG_STRICT, 0, 0, "untrusted signature" },
	{ SK_WRONG_KEY, CONF_SIG_PERMISSIVE, 0, 0, "untrusted signature" },
	{ SK_WRONG_KEY, CONF_SIG_DISABLED, 1, CONF_SIG_NOT_CHECKED, "" },
	{ SK_UNSIGNED, CONF_SIG_STRICT, 0, 0, "unsigned (no " },
	{ SK_UNSIGNED, CONF_SIG_PERMISSIVE, 1, CONF_SIG_UNSIGNED, "" },
	{ SK_UNSIGNED, CONF_SIG_DISABLED, 1, CONF_SIG_NOT_CHECKED, "" },
	{ SK_MALFORMED, CONF_SIG_STRICT, 0, 0, "invalid signature file" },
	{ SK_MALFORMED, CONF_SIG_PERMISSIVE, 0, 0, "invalid signature file" },
	{ SK_MALFORMED, CONF_SIG_DISABLED, 1, CONF_SIG_NOT_CHECKED, "" },
};

ParameterizedTestParameters(conf_manifest, signature_modes)
{
	return cr_make_param_array(struct mode_case, mode_cases,
	    sizeof(mode_cases) / sizeof(mode_cases[0]));
}

static void
run_mode_case(struct mode_case *c, int from_files)
{
	EVP_PKEY *trusted, *other;
	struct conf_keyring *ring = NULL;
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	char text[sizeof(good)], sig[CONF_SIG_B64_LEN + 2];
	const char *p, *s = NULL;
	int r;

	ct_mkdir();
	trusted = ct_keygen("ED25519");
	other = ct_keygen("ED25519");
	ct_write_pubkey(trusted, "trusted.pem");
	p = ct_path("trusted.pem");
	cr_assert_eq(conf_keyring_load(&p, 1, &ring, &e), 0);

	memcpy(text, good, sizeof(good));
	ct_sign(c->kind == SK_WRONG_KEY ? other : trusted, text, strlen(text),
	    sig, sizeof(sig));
	if (c->kind == SK_TAMPERED)
		*strstr(text, "api.weather") = 'b'; /* in [egress] */
	if (c->kind == SK_TAMPERED_PLUGIN)
		*strstr(text, "1.4.0") = '2'; /* in [plugin] */
	if (c->kind == SK_MALFORMED)
		strcpy(sig, "this is not base64\n");
	if (c->kind != SK_UNSIGNED)
		s = sig;

	if (from_files) {
		ct_write_str("pkg/manifest.ini", text);
		if (s != NULL)
			ct_write_str("pkg/manifest.ini.sig", s);
		r = conf_manifest_load(ct_path("pkg/manifest.ini"),
		    (enum conf_sig_mode)c->mode, ring, &m, &e);
	} else {
		r = conf_manifest_parse("m.ini", text, strlen(text), s,
		    s ? strlen(s) : 0, (enum conf_sig_mode)c->mode, ring, &m,
		    &e);
	}
	if (c->accepted) {
		cr_assert_eq(r, 0, "%s", ct_errors(&e));
		cr_expect_eq(m->sig, (enum conf_sig_status)c->status);
	} else {
		cr_assert_eq(r, EGRESS_ERR_INVALID);
		cr_expect_null(m);
		cr_expect(ct_has_error(&e, c->msg), "want %s in:\n%s", c->msg,
		    ct_errors(&e));
	}
	conf_manifest_free(m);
	conf_errors_done(&e);
	conf_keyring_free(ring);
	EVP_PKEY_free(trusted);
	EVP_PKEY_free(other);
	ct_rmdir();
}

ParameterizedTest(struct mode_case *c, conf_manifest, signature_modes)
{
	run_mode_case(c, 0);
}

ParameterizedTestParameters(conf_manifest, signature_modes_from_files)
{
	return cr_make_param_array(struct mode_case, mode_cases,
	    sizeof(mode_cases) / sizeof(mode_cases[0]));
}

ParameterizedTest(struct mode_case *c, conf_manifest,
    signature_modes_from_files)
{
	run_mode_case(c, 1);
}

Test(conf_manifest, no_keyring_in_strict_is_refused)
{
	EVP_PKEY *k = ct_keygen("ED25519");
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	char sig[CONF_SIG_B64_LEN + 2];

	ct_sign(k, good, strlen(good), sig, sizeof(sig));
	cr_expect_eq(conf_manifest_parse("m.ini", good, strlen(good), sig,
			 strlen(sig), CONF_SIG_STRICT, NULL, &m, &e),
	    EGRESS_ERR_INVALID);
	cr_expect(ct_has_error(&e, "m.ini.sig: untrusted signature"));
	conf_errors_done(&e);
	EVP_PKEY_free(k);
}

Test(conf_manifest, load_missing_and_oversized_files)
{
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	char *big;
	char want[512];

	ct_mkdir();
	cr_expect_eq(conf_manifest_load(ct_path("nope.ini"),
			 CONF_SIG_PERMISSIVE, NULL, &m, &e),
	    EGRESS_ERR_INVALID);
	(void)snprintf(want, sizeof(want), "%s: no such manifest",
	    ct_path("nope.ini"));
	cr_expect(ct_has_error(&e, want), "%s", ct_errors(&e));
	conf_errors_done(&e);

	cr_assert_not_null(big = malloc(65 * 1024));
	memset(big, ';', 65 * 1024);
	ct_write("big.ini", big, 65 * 1024);
	cr_expect_eq(conf_manifest_load(ct_path("big.ini"),
			 CONF_SIG_PERMISSIVE, NULL, &m, &e),
	    EGRESS_ERR_TOO_BIG);
	cr_expect_null(m);
	cr_expect(ct_has_error(&e, "manifest is over 65536 bytes"));
	conf_errors_done(&e);

	/* A .sig over its bound is an invalid signature file. */
	ct_write_str("pkg/manifest.ini", good);
	ct_write("pkg/manifest.ini.sig", big, 2048);
	cr_expect_eq(conf_manifest_load(ct_path("pkg/manifest.ini"),
			 CONF_SIG_PERMISSIVE, NULL, &m, &e),
	    EGRESS_ERR_INVALID);
	cr_expect(ct_has_error(&e, "invalid signature file"));
	conf_errors_done(&e);
	free(big);
	ct_rmdir();
}

/* A U-label entry is refused, and the message shows the A-label to write
 * (with a leading "*." kept). */
Test(conf_manifest, idn_entry_shows_a_label)
{
	static const char text[] =
	    "[plugin]\n"
	    "name = weather\n"
	    "version = 1.4.0\n"
	    "[egress]\n"
	    "hosts = b\xc3\xbc"
	    "cher.example, *.m\xc3\xbcnchen.example\n";
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };

	cr_assert_neq(parse(text, &m, &e), 0);
	cr_assert_null(m);
	cr_assert_eq(e.n, 2);
	cr_expect(strstr(e.msgs[0], "m.ini:5") != NULL, "%s", e.msgs[0]);
	cr_expect(strstr(e.msgs[0], "write 'xn--bcher-kva.example'") != NULL,
	    "%s", e.msgs[0]);
	cr_expect(strstr(e.msgs[1], "write '*.xn--mnchen-3ya.example'") !=
		NULL,
	    "%s", e.msgs[1]);
	conf_errors_done(&e);
}

/*
 * A manifest is untrusted: the values its errors quote reach operators'
 * terminals and JSON output, so every byte outside printable ASCII (here
 * a C1 CSI, a right-to-left override and a byte that is no UTF-8) is
 * quoted as \xNN, never as itself, and so is the backslash: text that
 * spells an escape is not taken for one.
 */
Test(conf_manifest, quoted_values_are_printable)
{
	static const char text[] = "[plugin]\n"
				   "name = w\xc2\x9b"
				   "2J\xe2\x80\xae\xff\\x41\n"
				   "version = 1.4.0\n";
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	const char *p;

	cr_assert_neq(parse(text, &m, &e), 0);
	cr_assert_eq(e.n, 1);
	for (p = e.msgs[0]; *p != '\0'; p++)
		cr_assert(*p >= 0x20 && *p <= 0x7e, "%s", e.msgs[0]);
	cr_expect(strstr(e.msgs[0],
		      "'w\\xc2\\x9b2J\\xe2\\x80\\xae\\xff\\x5cx41'") != NULL,
	    "%s", e.msgs[0]);
	conf_errors_done(&e);
}
