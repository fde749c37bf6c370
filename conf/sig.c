/* SPDX-License-Identifier: ISC */
/*
 * Manifest signatures: a keyring of trusted Ed25519 public keys loaded
 * from PEM files, the strict base64 format of manifest.ini.sig (one line
 * of standard base64 for the 64-byte signature, with an optional trailing
 * newline and nothing else), and verification with OpenSSL's
 * EVP_DigestVerify over the exact bytes of manifest.ini.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "conf/confint.h"

#define KEYFILE_MAX (64 * 1024)
#define KEYS_MAX    256

struct conf_keyring {
	EVP_PKEY **keys;
	size_t nkeys;
	struct conf_file_id *files;
	size_t nfiles;
};

const char *
conf_sig_status_str(enum conf_sig_status s)
{
	switch (s) {
	case CONF_SIG_NOT_CHECKED:
		return "not-checked";
	case CONF_SIG_VALID:
		return "valid";
	case CONF_SIG_UNSIGNED:
		return "unsigned";
	case CONF_SIG_UNTRUSTED:
		return "untrusted";
	case CONF_SIG_INVALID:
		return "invalid";
	}
	return "unknown";
}

void
conf_keyring_free(struct conf_keyring *k)
{
	size_t i;

	if (k == NULL)
		return;
	for (i = 0; i < k->nkeys; i++)
		EVP_PKEY_free(k->keys[i]);
	free(k->keys);
	for (i = 0; i < k->nfiles; i++)
		free(k->files[i].path);
	free(k->files);
	free(k);
}

size_t
conf_keyring_nfiles(const struct conf_keyring *k)
{
	return k == NULL ? 0 : k->nfiles;
}

const struct conf_file_id *
conf_keyring_file(const struct conf_keyring *k, size_t i)
{
	return k == NULL || i >= k->nfiles ? NULL : &k->files[i];
}

size_t
conf_keyring_count(const struct conf_keyring *k)
{
	return k == NULL ? 0 : k->nkeys;
}

static int
keyring_push(struct conf_keyring *k, EVP_PKEY *pkey)
{
	EVP_PKEY **v;

	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	if ((v = realloc(k->keys, (k->nkeys + 1) * sizeof(*v))) == NULL)
		return EGRESS_ERR_NOMEM;
	k->keys = v;
	k->keys[k->nkeys++] = pkey;
	return 0;
}

/* Whoever may write a key file chooses which manifests are trusted: no
 * group or other may. (Its owner is not checked: egressctl, run as
 * root, and the broker, as its own user, must agree on what loads.)
 * Return 0, or EGRESS_ERR_INVALID with the error in errs. */
static int
key_file_guarded(const char *path, const struct conf_file_id *id,
    struct conf_errors *errs)
{
	if ((id->mode & 022) != 0) {
		conf_errors_addf(errs,
		    "%s: is group- or world-writable (chmod go-w); whoever "
		    "can write a trusted key chooses which manifests are "
		    "trusted",
		    path);
		return EGRESS_ERR_INVALID;
	}
	return 0;
}

/* Load the one PEM block of a file, an Ed25519 PUBLIC KEY, from a file
 * that neither group nor others may write. */
static int
keyring_load_file(struct conf_keyring *k, const char *path,
    struct conf_errors *errs)
{
	struct conf_file_id *files, *id;
	BIO *bio = NULL;
	EVP_PKEY *pkey = NULL;
	char *buf = NULL, *name = NULL, *header = NULL;
	unsigned char *data = NULL;
	const unsigned char *p;
	size_t len, nblocks = 0;
	long dlen;
	int r, rc = EGRESS_ERR_INVALID;

	files = realloc(k->files, (k->nfiles + 1) * sizeof(*files));
	if (files == NULL)
		return EGRESS_ERR_NOMEM;
	k->files = files;
	id = &k->files[k->nfiles];
	memset(id, 0, sizeof(*id));
	if ((id->path = strdup(path)) == NULL)
		return EGRESS_ERR_NOMEM;
	k->nfiles++;

	r = conf_read_file(path, KEYFILE_MAX, &buf, &len, id);
	if (r == EGRESS_ERR_NOT_FOUND)
		return conf_errors_addf(errs, "%s: no such key file", path);
	if (r == EGRESS_ERR_TOO_BIG)
		return conf_errors_addf(errs, "%s: key file over %d bytes",
		    path, KEYFILE_MAX);
	if (r == EGRESS_ERR_NOMEM)
		return r;
	if (r != 0)
		return conf_errors_addf(errs, "%s: cannot read: %s", path,
		    strerror(errno));
	if (key_file_guarded(path, id, errs) != 0)
		goto out;
	if ((bio = BIO_new_mem_buf(buf, (int)len)) == NULL) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	for (;;) {
		if (PEM_read_bio(bio, &name, &header, &data, &dlen) != 1)
			break;
		if (++nblocks > 1) {
			conf_errors_addf(errs,
			    "%s: holds more than one PEM block; a trusted key "
			    "file holds one key, so that each key trusted is "
			    "listed, and removed, by its own fingerprint",
			    path);
			goto out;
		}
		if (strcmp(name, "PUBLIC KEY") != 0) {
			conf_errors_addf(errs,
			    "%s: PEM block %zu is '%s'; "
			    "trusted_keys takes Ed25519 PUBLIC KEY blocks "
			    "only (never a private key)",
			    path, nblocks, name);
			goto out;
		}
		p = data;
		pkey = d2i_PUBKEY(NULL, &p, dlen);
		if (pkey == NULL || p != data + dlen) {
			conf_errors_addf(errs,
			    "%s: PEM block %zu is not a "
			    "valid public key",
			    path, nblocks);
			goto out;
		}
		if (!EVP_PKEY_is_a(pkey, "ED25519")) {
			conf_errors_addf(errs,
			    "%s: PEM block %zu is a %s "
			    "key; only Ed25519 keys are accepted",
			    path, nblocks, EVP_PKEY_get0_type_name(pkey));
			goto out;
		}
		if (k->nkeys >= KEYS_MAX) {
			conf_errors_addf(errs,
			    "%s: more than %d trusted "
			    "keys",
			    path, KEYS_MAX);
			goto out;
		}
		if ((rc = keyring_push(k, pkey)) != 0)
			goto out;
		pkey = NULL;
		OPENSSL_free(name);
		OPENSSL_free(header);
		OPENSSL_free(data);
		name = header = NULL;
		data = NULL;
		rc = EGRESS_ERR_INVALID;
	}
	/* PEM_read_bio leaves "no start line" on the queue at the end. */
	ERR_clear_error();
	if (nblocks == 0) {
		conf_errors_addf(errs, "%s: no PEM public key found", path);
		goto out;
	}
	rc = 0;
out:
	ERR_clear_error();
	EVP_PKEY_free(pkey);
	OPENSSL_free(name);
	OPENSSL_free(header);
	OPENSSL_free(data);
	BIO_free(bio);
	free(buf);
	return rc;
}

int
conf_keyring_load(const char *const *paths, size_t n,
    struct conf_keyring **ret, struct conf_errors *reterr)
{
	struct conf_keyring *k;
	size_t i, nerr0 = reterr->n;
	int r, rc = 0;

	if ((k = calloc(1, sizeof(*k))) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		r = keyring_load_file(k, paths[i], reterr);
		if (r == EGRESS_ERR_NOMEM) {
			rc = r;
			break;
		}
	}
	if (rc == 0 && reterr->n > nerr0)
		rc = EGRESS_ERR_INVALID;
	if (rc != 0) {
		conf_keyring_free(k);
		return rc;
	}
	*ret = k;
	return 0;
}

/* ---- base64 ------------------------------------------------------------ */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int
b64_value(char c)
{
	const char *p;

	if (c == '\0' || (p = strchr(b64, c)) == NULL)
		return -1;
	return (int)(p - b64);
}

/*
 * Decode exactly one line of padded standard base64 (with an optional
 * final "\n") into out (at most outmax bytes). Non-canonical encodings
 * (non-zero bits in the padding) are refused. Return the length or -1.
 */
static int
b64_decode_line(const char *s, size_t len, unsigned char *out, size_t outmax)
{
	size_t i, o = 0;
	int v[4], j, pad;

	if (len > 0 && s[len - 1] == '\n')
		len--;
	if (len == 0 || len % 4 != 0)
		return -1;
	for (i = 0; i < len; i += 4) {
		pad = 0;
		for (j = 0; j < 4; j++) {
			if (s[i + j] == '=' && i + 4 == len && j >= 2) {
				v[j] = 0;
				pad++;
				continue;
			}
			if (pad > 0 || (v[j] = b64_value(s[i + j])) < 0)
				return -1;
		}
		if (o + 3 - (size_t)pad > outmax)
			return -1;
		out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (pad < 2)
			out[o++] = (unsigned char)((v[1] & 0xf) << 4 |
			    v[2] >> 2);
		else if ((v[1] & 0xf) != 0)
			return -1;
		if (pad < 1)
			out[o++] = (unsigned char)((v[2] & 0x3) << 6 | v[3]);
		else if (pad == 1 && (v[2] & 0x3) != 0)
			return -1;
	}
	return (int)o;
}

int
conf_sig_encode(const unsigned char sig[CONF_SIG_LEN], char *buf, size_t n)
{
	size_t i, o = 0;
	uint32_t v;

	if (n < CONF_SIG_B64_LEN + 1)
		return EGRESS_ERR_TOO_BIG;
	for (i = 0; i + 3 <= CONF_SIG_LEN; i += 3) {
		v = (uint32_t)sig[i] << 16 | (uint32_t)sig[i + 1] << 8 |
		    sig[i + 2];
		buf[o++] = b64[v >> 18 & 63];
		buf[o++] = b64[v >> 12 & 63];
		buf[o++] = b64[v >> 6 & 63];
		buf[o++] = b64[v & 63];
	}
	/* 64 = 21 * 3 + 1: one byte left, two '=' of padding. */
	v = (uint32_t)sig[i] << 16;
	buf[o++] = b64[v >> 18 & 63];
	buf[o++] = b64[v >> 12 & 63];
	buf[o++] = '=';
	buf[o++] = '=';
	buf[o] = '\0';
	return (int)o;
}

int
conf_key_fingerprint(const struct evp_pkey_st *k, char *out)
{
	unsigned char raw[32], md[32];
	size_t rawlen = sizeof(raw), i;
	unsigned mdlen = 0;

	out[0] = '\0';
	if (EVP_PKEY_get_raw_public_key(k, raw, &rawlen) != 1 ||
	    EVP_Digest(raw, rawlen, md, &mdlen, EVP_sha256(), NULL) != 1) {
		ERR_clear_error();
		return -1;
	}
	memcpy(out, "sha256:", 7);
	for (i = 0; i < 16; i++)
		(void)snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
	return 0;
}

enum conf_sig_status
conf_sig_verify(const char *buf, size_t len, const char *sig, size_t siglen,
    const struct conf_keyring *keys)
{
	return conf_sig_verify_by(buf, len, sig, siglen, keys, NULL);
}

enum conf_sig_status
conf_sig_verify_by(const char *buf, size_t len, const char *sig, size_t siglen,
    const struct conf_keyring *keys, char *signer)
{
	unsigned char raw[CONF_SIG_LEN + 3];
	EVP_MD_CTX *ctx;
	size_t i;
	int ok;

	if (signer != NULL)
		signer[0] = '\0';
	if (sig == NULL)
		return CONF_SIG_UNSIGNED;
	if (siglen > CONF_SIG_B64_LEN + 1 ||
	    b64_decode_line(sig, siglen, raw, sizeof(raw)) != CONF_SIG_LEN)
		return CONF_SIG_INVALID;
	if (keys == NULL)
		return CONF_SIG_UNTRUSTED;
	for (i = 0; i < keys->nkeys; i++) {
		if ((ctx = EVP_MD_CTX_new()) == NULL)
			return CONF_SIG_UNTRUSTED;
		ok = EVP_DigestVerifyInit(ctx, NULL, NULL, NULL,
			 keys->keys[i]) == 1 &&
		    EVP_DigestVerify(ctx, raw, CONF_SIG_LEN,
			(const unsigned char *)buf, len) == 1;
		EVP_MD_CTX_free(ctx);
		ERR_clear_error();
		if (ok) {
			if (signer != NULL)
				(void)conf_key_fingerprint(keys->keys[i],
				    signer);
			return CONF_SIG_VALID;
		}
	}
	return CONF_SIG_UNTRUSTED;
}
