/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for manifest signatures (conf/sig.c): keyring loading (one
 * Ed25519 PEM public key a file, which others may not write, every file
 * named in its error), the strict format
 * of manifest.ini.sig, and verification: good, a tampered byte anywhere,
 * a wrong key, no key, unsigned. Keys are made at test time with OpenSSL.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <sys/stat.h>

#include "conf/conf.h"
#include "conf_test.h"

static const char manifest[] =
    "[plugin]\nname = weather\nversion = 1.4.0\npermissions = http_client\n"
    "[egress]\nhosts = api.weather.example\noperator_defined = false\n";

static EVP_PKEY *key_a, *key_b;
static struct conf_keyring *ring_a;

static void
setup(void)
{
	struct conf_errors e = { 0 };
	const char *p;

	ct_mkdir();
	key_a = ct_keygen("ED25519");
	key_b = ct_keygen("ED25519");
	ct_write_pubkey(key_a, "a.pem");
	p = ct_path("a.pem");
	cr_assert_eq(conf_keyring_load(&p, 1, &ring_a, &e), 0, "%s",
	    ct_errors(&e));
	cr_assert_eq(conf_keyring_count(ring_a), 1);
}

static void
teardown(void)
{
	conf_keyring_free(ring_a);
	EVP_PKEY_free(key_a);
	EVP_PKEY_free(key_b);
	ct_rmdir();
}

TestSuite(conf_sig, .init = setup, .fini = teardown);

Test(conf_sig, good_signature_is_valid)
{
	char sig[CONF_SIG_B64_LEN + 2];

	ct_sign(key_a, manifest, strlen(manifest), sig, sizeof(sig));
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), sig,
			 strlen(sig), ring_a),
	    CONF_SIG_VALID);
	/* Without the trailing newline too. */
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), sig,
			 CONF_SIG_B64_LEN, ring_a),
	    CONF_SIG_VALID);
}

Test(conf_sig, every_tampered_byte_is_untrusted)
{
	char sig[CONF_SIG_B64_LEN + 2], copy[sizeof(manifest)];
	size_t i, len = strlen(manifest);

	ct_sign(key_a, manifest, len, sig, sizeof(sig));
	/* Every byte, the [egress] section included. */
	for (i = 0; i < len; i++) {
		memcpy(copy, manifest, sizeof(manifest));
		copy[i] ^= 0x01;
		cr_assert_eq(conf_sig_verify(copy, len, sig, strlen(sig),
				 ring_a),
		    CONF_SIG_UNTRUSTED, "byte %zu", i);
	}
	/* One byte more or less. */
	cr_expect_eq(conf_sig_verify(manifest, len - 1, sig, strlen(sig),
			 ring_a),
	    CONF_SIG_UNTRUSTED);
	cr_expect_eq(conf_sig_verify(manifest, len + 1, sig, strlen(sig),
			 ring_a),
	    CONF_SIG_UNTRUSTED);
}

Test(conf_sig, wrong_key_and_no_key_are_untrusted)
{
	char sig[CONF_SIG_B64_LEN + 2];

	ct_sign(key_b, manifest, strlen(manifest), sig, sizeof(sig));
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), sig,
			 strlen(sig), ring_a),
	    CONF_SIG_UNTRUSTED);
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), sig,
			 strlen(sig), NULL),
	    CONF_SIG_UNTRUSTED);
}

Test(conf_sig, no_signature_is_unsigned)
{
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), NULL, 0,
			 ring_a),
	    CONF_SIG_UNSIGNED);
}

Test(conf_sig, any_trusted_key_verifies)
{
	struct conf_keyring *k = NULL;
	struct conf_errors e = { 0 };
	const char *paths[2];
	char sig[CONF_SIG_B64_LEN + 2];

	ct_write_pubkey(key_b, "b.pem");
	paths[0] = ct_path("a.pem");
	paths[1] = ct_path("b.pem");
	cr_assert_eq(conf_keyring_load(paths, 2, &k, &e), 0);
	cr_expect_eq(conf_keyring_count(k), 2);
	ct_sign(key_b, manifest, strlen(manifest), sig, sizeof(sig));
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), sig,
			 strlen(sig), k),
	    CONF_SIG_VALID);
	conf_keyring_free(k);
}

/* The key that verified a signature is named by its fingerprint (so an
 * operator sees which vendor's key signed a package); none otherwise. */
Test(conf_sig, the_verifying_key_is_named)
{
	struct conf_keyring *k = NULL;
	struct conf_errors e = { 0 };
	const char *paths[2];
	char sig[CONF_SIG_B64_LEN + 2], fp_b[CONF_FINGERPRINT_LEN + 1];
	char signer[CONF_FINGERPRINT_LEN + 1];
	size_t i;

	ct_write_pubkey(key_b, "b.pem");
	paths[0] = ct_path("a.pem");
	paths[1] = ct_path("b.pem");
	cr_assert_eq(conf_keyring_load(paths, 2, &k, &e), 0);
	cr_assert_eq(conf_key_fingerprint(key_b, fp_b), 0);
	cr_assert_eq(strlen(fp_b), CONF_FINGERPRINT_LEN);
	cr_assert_eq(strncmp(fp_b, "sha256:", 7), 0);
	for (i = 7; i < CONF_FINGERPRINT_LEN; i++)
		cr_assert(strchr("0123456789abcdef", fp_b[i]) != NULL, "%s",
		    fp_b);
	ct_sign(key_b, manifest, strlen(manifest), sig, sizeof(sig));
	cr_assert_eq(conf_sig_verify_by(manifest, strlen(manifest), sig,
			 strlen(sig), k, signer),
	    CONF_SIG_VALID);
	cr_assert_str_eq(signer, fp_b);
	cr_assert_eq(conf_sig_verify_by(manifest, strlen(manifest) - 1, sig,
			 strlen(sig), k, signer),
	    CONF_SIG_UNTRUSTED);
	cr_assert_str_eq(signer, "");
	conf_keyring_free(k);
}

/* One key a file: a second one would be trusted by the broker without a
 * fingerprint of its own in egressctl trust list, add or remove. */
Test(conf_sig, a_second_key_in_one_file_is_refused)
{
	struct conf_keyring *k = NULL;
	struct conf_errors e = { 0 };
	BIO *b = BIO_new(BIO_s_mem());
	char want[512], *data;
	const char *p;
	long n;

	cr_assert_not_null(b);
	cr_assert_eq(PEM_write_bio_PUBKEY(b, key_a), 1);
	cr_assert_eq(PEM_write_bio_PUBKEY(b, key_b), 1);
	n = BIO_get_mem_data(b, &data);
	ct_write("both.pem", data, (size_t)n);
	BIO_free(b);
	p = ct_path("both.pem");
	cr_assert_eq(conf_keyring_load(&p, 1, &k, &e), EGRESS_ERR_INVALID);
	cr_assert_null(k);
	cr_assert_eq(e.n, 1, "%s", ct_errors(&e));
	(void)snprintf(want, sizeof(want),
	    "%s: holds more than one PEM block; a trusted key file holds one "
	    "key, so that each key trusted is listed, and removed, by its "
	    "own fingerprint",
	    p);
	cr_expect_str_eq(e.msgs[0], want);
	conf_errors_done(&e);
}

/* Whoever may write a trusted key file chooses what is trusted: a file
 * group or others may write is refused. */
Test(conf_sig, a_key_file_others_may_write_is_refused)
{
	struct conf_keyring *k = NULL;
	struct conf_errors e = { 0 };
	const char *p = ct_path("a.pem");
	char want[512];
	mode_t modes[] = { 0664, 0646, 0666 };
	size_t i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		cr_assert_eq(chmod(p, modes[i]), 0);
		cr_assert_eq(conf_keyring_load(&p, 1, &k, &e),
		    EGRESS_ERR_INVALID, "mode %o", (unsigned)modes[i]);
		cr_assert_eq(e.n, 1, "%s", ct_errors(&e));
		(void)snprintf(want, sizeof(want),
		    "%s: is group- or world-writable (chmod go-w); whoever "
		    "can write a trusted key chooses which manifests are "
		    "trusted",
		    p);
		cr_expect_str_eq(e.msgs[0], want);
		conf_errors_done(&e);
	}
	cr_assert_eq(chmod(p, 0644), 0);
	cr_assert_eq(conf_keyring_load(&p, 1, &k, &e), 0, "%s", ct_errors(&e));
	conf_keyring_free(k);
}

/* ---- Malformed signature files ----------------------------------------- */

struct sig_case {
	char text[200];
	char why[64];
};

ParameterizedTestParameters(conf_sig, malformed_is_invalid)
{
	static struct sig_case cases[] = {
		{ "", "empty" },
		{ "\n", "only a newline" },
		{ "AAAA\n", "too short" },
		{ "not base64 at all!", "not base64" },
		{ "@@@@", "bad alphabet" },
	};

	return cr_make_param_array(struct sig_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct sig_case *c, conf_sig, malformed_is_invalid)
{
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), c->text,
			 strlen(c->text), ring_a),
	    CONF_SIG_INVALID, "%s", c->why);
}

/* Variations of a good signature file that are not exactly one line. */
struct sig_edit {
	char prefix[8];
	char suffix[8];
	int cut; /* bytes removed from the end of the base64 */
	char why[64];
};

ParameterizedTestParameters(conf_sig, edited_good_is_invalid)
{
	static struct sig_edit cases[] = {
		{ "", "\n\n", 0, "two newlines" },
		{ "", "\r\n", 0, "CRLF" },
		{ "", " \n", 0, "trailing blank" },
		{ " ", "\n", 0, "leading blank" },
		{ "", "\nAAAA\n", 0, "a second line" },
		{ "", "AAAA\n", 0, "too long" },
		{ "", "\n", 4, "too short by one group" },
		{ "", "=A\n", 2, "padding before data" },
		{ "", "A=\n", 2, "65 bytes" },
		{ "", "", 2, "padding removed" },
	};

	return cr_make_param_array(struct sig_edit, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct sig_edit *c, conf_sig, edited_good_is_invalid)
{
	char sig[CONF_SIG_B64_LEN + 2], text[256];

	ct_sign(key_a, manifest, strlen(manifest), sig, sizeof(sig));
	sig[CONF_SIG_B64_LEN - c->cut] = '\0';
	(void)snprintf(text, sizeof(text), "%s%s%s", c->prefix, sig,
	    c->suffix);
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), text,
			 strlen(text), ring_a),
	    CONF_SIG_INVALID, "%s", c->why);
}

Test(conf_sig, non_canonical_padding_bits_are_invalid)
{
	char sig[CONF_SIG_B64_LEN + 2];
	const char *b64 =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	int v;

	ct_sign(key_a, manifest, strlen(manifest), sig, sizeof(sig));
	/* The last character before "==" carries 4 unused bits. */
	v = (int)(strchr(b64, sig[CONF_SIG_B64_LEN - 3]) - b64);
	sig[CONF_SIG_B64_LEN - 3] = b64[v | 1];
	if ((v | 1) == v)
		sig[CONF_SIG_B64_LEN - 3] = b64[v & ~1];
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), sig,
			 strlen(sig), ring_a),
	    CONF_SIG_INVALID);
}

Test(conf_sig, encode_round_trips)
{
	unsigned char raw[CONF_SIG_LEN];
	char text[CONF_SIG_B64_LEN + 1], small[CONF_SIG_B64_LEN];
	size_t i;

	for (i = 0; i < sizeof(raw); i++)
		raw[i] = (unsigned char)(i * 37 + 11);
	cr_assert_eq(conf_sig_encode(raw, text, sizeof(text)),
	    CONF_SIG_B64_LEN);
	cr_expect_eq(strlen(text), CONF_SIG_B64_LEN);
	cr_expect_str_eq(text + CONF_SIG_B64_LEN - 2, "==");
	cr_expect_eq(conf_sig_encode(raw, small, sizeof(small)),
	    EGRESS_ERR_TOO_BIG);
	/* Well-formed, so not invalid: merely untrusted. */
	cr_expect_eq(conf_sig_verify(manifest, strlen(manifest), text,
			 strlen(text), ring_a),
	    CONF_SIG_UNTRUSTED);
}

Test(conf_sig, status_strings)
{
	cr_expect_str_eq(conf_sig_status_str(CONF_SIG_NOT_CHECKED),
	    "not-checked");
	cr_expect_str_eq(conf_sig_status_str(CONF_SIG_VALID), "valid");
	cr_expect_str_eq(conf_sig_status_str(CONF_SIG_UNSIGNED), "unsigned");
	cr_expect_str_eq(conf_sig_status_str(CONF_SIG_UNTRUSTED), "untrusted");
	cr_expect_str_eq(conf_sig_status_str(CONF_SIG_INVALID), "invalid");
}

/* ---- Keyrings ----------------------------------------------------------- */

struct key_case {
	char name[32];
	char content[8]; /* "ec", "priv", "empty", "junk", "none" */
	char msg[128];	 /* after "DIR/NAME: " */
};

ParameterizedTestParameters(conf_sig, bad_key_files)
{
	static struct key_case cases[] = {
		{ "missing.pem", "none", "no such key file" },
		{ "ec.pem", "ec",
		    "PEM block 1 is a EC key; only Ed25519 keys "
		    "are accepted" },
		{ "priv.pem", "priv",
		    "PEM block 1 is 'PRIVATE KEY'; "
		    "trusted_keys takes Ed25519 PUBLIC KEY blocks only (never a "
		    "private key)" },
		{ "empty.pem", "empty", "no PEM public key found" },
		{ "junk.pem", "junk", "no PEM public key found" },
	};

	return cr_make_param_array(struct key_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct key_case *c, conf_sig, bad_key_files)
{
	struct conf_keyring *k = NULL;
	struct conf_errors e = { 0 };
	const char *paths[2];
	char want[512];
	EVP_PKEY *other = NULL;

	if (strcmp(c->content, "ec") == 0) {
		other = ct_keygen("EC");
		ct_write_pubkey(other, c->name);
	} else if (strcmp(c->content, "priv") == 0) {
		ct_write_privkey(key_a, c->name);
	} else if (strcmp(c->content, "empty") == 0) {
		ct_write_str(c->name, "");
	} else if (strcmp(c->content, "junk") == 0) {
		ct_write_str(c->name, "hello\n");
	}
	/* A good file first: the bad one still fails the whole load. */
	paths[0] = ct_path("a.pem");
	paths[1] = ct_path(c->name);
	cr_assert_eq(conf_keyring_load(paths, 2, &k, &e), EGRESS_ERR_INVALID);
	cr_assert_eq(e.n, 1, "%s", ct_errors(&e));
	(void)snprintf(want, sizeof(want), "%s: %s", ct_path(c->name), c->msg);
	cr_expect_str_eq(e.msgs[0], want);
	conf_errors_done(&e);
	EVP_PKEY_free(other);
}
