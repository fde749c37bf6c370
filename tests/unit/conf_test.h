/* SPDX-License-Identifier: ISC */
/*
 * Helpers shared by the conf unit tests (header-only, static functions):
 * a scratch folder under /tmp removed at the end, file writing, and
 * Ed25519 keys and signatures made with OpenSSL's EVP API at test time.
 */
#ifndef EGRESS_TESTS_CONF_TEST_H
#define EGRESS_TESTS_CONF_TEST_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "conf/conf.h"

static char ct_dir[256];

static inline void
ct_mkdir(void)
{
	strcpy(ct_dir, "/tmp/egressd-conf-test-XXXXXX");
	cr_assert_not_null(mkdtemp(ct_dir));
}

static inline int
ct_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(path);
}

static inline void
ct_rmdir(void)
{
	if (ct_dir[0] != '\0')
		(void)nftw(ct_dir, ct_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	ct_dir[0] = '\0';
}

/* Return "DIR/name" in a static buffer (one of four, round robin). */
static inline const char *
ct_path(const char *name)
{
	static char bufs[4][512];
	static int i;
	char *b = bufs[i++ & 3];

	(void)snprintf(b, 512, "%s/%s", ct_dir, name);
	return b;
}

/* Write len bytes to DIR/name, creating folders on the way. */
static inline void
ct_write(const char *name, const void *data, size_t len)
{
	char path[512], *p;
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/%s", ct_dir, name) >=
	    (int)sizeof(path))
		cr_assert_fail("test path too long: %s/%s", ct_dir, name);
	for (p = path + strlen(ct_dir) + 1; (p = strchr(p, '/')) != NULL;
	     p++) {
		*p = '\0';
		(void)mkdir(path, 0700);
		*p = '/';
	}
	cr_assert_not_null(f = fopen(path, "wb"), "%s", path);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

static inline void
ct_write_str(const char *name, const char *s)
{
	ct_write(name, s, strlen(s));
}

static inline EVP_PKEY *
ct_keygen(const char *type)
{
	EVP_PKEY *k;

	if (strcmp(type, "EC") == 0)
		k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	else
		k = EVP_PKEY_Q_keygen(NULL, NULL, type);
	cr_assert_not_null(k);
	return k;
}

/* Write the public half of k as PEM to DIR/name. */
static inline void
ct_write_pubkey(EVP_PKEY *k, const char *name)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long n;

	cr_assert_not_null(b);
	cr_assert_eq(PEM_write_bio_PUBKEY(b, k), 1);
	n = BIO_get_mem_data(b, &data);
	ct_write(name, data, (size_t)n);
	BIO_free(b);
}

static inline void
ct_write_privkey(EVP_PKEY *k, const char *name)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long n;

	cr_assert_not_null(b);
	cr_assert_eq(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL),
	    1);
	n = BIO_get_mem_data(b, &data);
	ct_write(name, data, (size_t)n);
	BIO_free(b);
}

/* Sign len bytes with k; write the manifest.ini.sig text (with its
 * newline) into out (at least CONF_SIG_B64_LEN + 2 bytes). */
static inline void
ct_sign(EVP_PKEY *k, const void *buf, size_t len, char *out, size_t n)
{
	unsigned char sig[CONF_SIG_LEN];
	size_t siglen = sizeof(sig);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	cr_assert_not_null(ctx);
	cr_assert_eq(EVP_DigestSignInit(ctx, NULL, NULL, NULL, k), 1);
	cr_assert_eq(EVP_DigestSign(ctx, sig, &siglen, buf, len), 1);
	cr_assert_eq(siglen, CONF_SIG_LEN);
	EVP_MD_CTX_free(ctx);
	cr_assert_eq(conf_sig_encode(sig, out, n), CONF_SIG_B64_LEN);
	strcat(out, "\n");
}

/* Sign the file DIR/name and write DIR/name.sig. */
static inline void
ct_sign_file(EVP_PKEY *k, const char *name)
{
	char path[512], sig[CONF_SIG_B64_LEN + 2], *buf;
	FILE *f;
	long len;

	(void)snprintf(path, sizeof(path), "%s/%s", ct_dir, name);
	cr_assert_not_null(f = fopen(path, "rb"));
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	cr_assert_not_null(buf = malloc((size_t)len + 1));
	cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
	(void)fclose(f);
	ct_sign(k, buf, (size_t)len, sig, sizeof(sig));
	free(buf);
	(void)snprintf(path, sizeof(path), "%s.sig", name);
	ct_write_str(path, sig);
}

/* Answer whether any message of e contains needle. */
static inline int
ct_has_error(const struct conf_errors *e, const char *needle)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		if (strstr(e->msgs[i], needle) != NULL)
			return 1;
	return 0;
}

static inline const char *
ct_errors(const struct conf_errors *e)
{
	static char buf[4096];
	size_t i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < e->n && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s\n",
		    e->msgs[i]);
	return buf;
}

#endif /* EGRESS_TESTS_CONF_TEST_H */
