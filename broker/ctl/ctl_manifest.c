/* SPDX-License-Identifier: ISC */
/*
 * `egressctl manifest keygen|sign|verify`: Ed25519 package signatures with
 * OpenSSL. keygen writes a PEM private key (mode 0600, never over an
 * existing file) and KEY.pub (PEM SubjectPublicKeyInfo); sign writes
 * manifest.ini.sig, the base64 of the signature over the manifest's exact
 * bytes on one line; verify says valid, invalid, unsigned or untrusted with
 * the same meanings conf/ gives them, and exits 0 only for valid.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "broker/ctl/ctl.h"
#include "broker/ctl/iniedit.h"
#include "broker/ctl/pkg.h"
#include "conf/conf.h"

#define SIG_FILE_MAX	1024
#define ED25519_SIG_LEN 64
#define KEY_FILE_MAX	(64 * 1024)

static void
manifest_usage(FILE *f)
{
	fprintf(f,
	    "usage: egressctl manifest keygen --out KEY\n"
	    "       egressctl manifest sign --key KEY PKG\n"
	    "       egressctl [-c FILE] manifest verify [--key PUB] [--json] "
	    "PKG\n");
}

/* Say what is wrong with the folder a new file would go in. */
static void
explain_missing_folder(const char *path)
{
	char *d = strdup(path), *sl;
	struct stat st;

	if (d == NULL)
		return;
	if ((sl = strrchr(d, '/')) != NULL && sl != d) {
		*sl = '\0';
		if (stat(d, &st) != 0 && errno == ENOENT)
			fprintf(stderr,
			    "egressctl: %s: the folder %s does not "
			    "exist; create it first (mkdir -m 0700 %s)\n",
			    path, d, d);
		else if (stat(d, &st) == 0 && !S_ISDIR(st.st_mode))
			fprintf(stderr, "egressctl: %s: %s is not a folder\n",
			    path, d);
	}
	free(d);
}

/* Write the whole PEM text of bio to a new file (O_EXCL) with mode. */
static int
write_new(const char *path, BIO *bio, mode_t mode)
{
	char *data;
	long n = BIO_get_mem_data(bio, &data);
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    mode);
	if (fd == -1) {
		int e = errno;

		if (e == ENOENT)
			explain_missing_folder(path);
		else
			fprintf(stderr, "egressctl: %s: %s\n", path,
			    strerror(e));
		return -1;
	}
	if (fchmod(fd, mode) == -1 ||
	    write(fd, data, (size_t)n) != (ssize_t)n || fsync(fd) == -1 ||
	    close(fd) == -1) {
		fprintf(stderr, "egressctl: %s: %s\n", path, strerror(errno));
		(void)unlink(path);
		return -1;
	}
	return 0;
}

/* The 32 hex digits of k's fingerprint (conf_key_fingerprint() without
 * its "sha256:"), for messages. */
static void
key_fingerprint(EVP_PKEY *k, char *out, size_t n)
{
	char fp[CONF_FINGERPRINT_LEN + 1];

	(void)conf_key_fingerprint(k, fp);
	(void)snprintf(out, n, "%s", fp[0] != '\0' ? fp + 7 : "");
}

/* Is path a trusted key file the broker would load (conf_keyring_load():
 * one key, in a file no group or other may write)? Return 0, or -1 with
 * its error in msg. */
static int
key_file_check(const char *path, char *msg, size_t n)
{
	struct conf_keyring *ring = NULL;
	struct conf_errors errs = { 0 };
	int rc = 0;

	if (conf_keyring_load(&path, 1, &ring, &errs) != 0) {
		(void)snprintf(msg, n, "%s",
		    errs.n > 0 ? errs.msgs[0] : "out of memory");
		rc = -1;
	}
	conf_keyring_free(ring);
	conf_errors_done(&errs);
	return rc;
}

const char *
ctl_key_fingerprint(const char *path, char *buf, size_t n, char *reterr_msg,
    size_t errn)
{
	EVP_PKEY *k = NULL;
	char fp[40];
	FILE *fp_in;

	if (key_file_check(path, reterr_msg, errn) != 0)
		return NULL;
	if ((fp_in = fopen(path, "re")) == NULL) {
		(void)snprintf(reterr_msg, errn, "%s: %s", path,
		    strerror(errno));
		return NULL;
	}
	k = PEM_read_PUBKEY(fp_in, NULL, NULL, NULL);
	(void)fclose(fp_in);
	if (k == NULL || EVP_PKEY_get_base_id(k) != EVP_PKEY_ED25519) {
		(void)snprintf(reterr_msg, errn,
		    "%s: not an Ed25519 public "
		    "key (PEM)",
		    path);
		EVP_PKEY_free(k);
		return NULL;
	}
	key_fingerprint(k, fp, sizeof(fp));
	EVP_PKEY_free(k);
	(void)snprintf(buf, n, "sha256:%s", fp);
	return buf;
}

static int
cmd_keygen(const struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL;
	char *pub = NULL, fp[40];
	EVP_PKEY *k = NULL;
	BIO *bpriv = NULL, *bpub = NULL;
	int ch, rc = CTL_EXIT_ERROR;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "+o:", longopts, NULL)) != -1) {
		if (ch != 'o') {
			manifest_usage(stderr);
			return CTL_EXIT_USAGE;
		}
		out = optarg;
	}
	if (out == NULL || optind != argc) {
		manifest_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (asprintf(&pub, "%s.pub", out) < 0)
		return CTL_EXIT_ERROR;
	if ((k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519")) == NULL ||
	    (bpriv = BIO_new(BIO_s_mem())) == NULL ||
	    (bpub = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_PrivateKey(bpriv, k, NULL, NULL, 0, NULL, NULL) !=
		1 ||
	    PEM_write_bio_PUBKEY(bpub, k) != 1) {
		fprintf(stderr, "egressctl: cannot generate an Ed25519 key\n");
		goto out;
	}
	if (access(pub, F_OK) == 0) {
		fprintf(stderr, "egressctl: %s exists; not overwriting\n",
		    pub);
		goto out;
	}
	if (write_new(out, bpriv, 0600) != 0)
		goto out;
	if (write_new(pub, bpub, 0644) != 0) {
		(void)unlink(out);
		goto out;
	}
	key_fingerprint(k, fp, sizeof(fp));
	printf("wrote %s (Ed25519 private key, mode 0600) and %s (public "
	       "key)\n",
	    out, pub);
	printf("key fingerprint: sha256:%s\n", fp);
	printf("trust it with: %s trust add %s\n", ctl_cmd(ctx), pub);
	rc = CTL_EXIT_OK;
out:
	BIO_free(bpriv);
	BIO_free(bpub);
	EVP_PKEY_free(k);
	free(pub);
	return rc;
}

static EVP_PKEY *
load_key(const char *path, int private)
{
	char *buf = NULL;
	size_t len = 0;
	BIO *b = NULL;
	EVP_PKEY *k = NULL;
	struct stat st;
	int r;

	if ((r = pkg_read_file(path, KEY_FILE_MAX, &buf, &len)) != 0) {
		fprintf(stderr, "egressctl: %s: %s\n", path,
		    r == EGRESS_ERR_NOT_FOUND	? "no such file" :
			r == EGRESS_ERR_TOO_BIG ? "too large for a key" :
						  strerror(errno));
		return NULL;
	}
	if (private && stat(path, &st) == 0 && (st.st_mode & 077) != 0) {
		fprintf(stderr,
		    "egressctl: %s: a private key must not be "
		    "readable by others (chmod 600 %s)\n",
		    path, path);
		goto out;
	}
	if ((b = BIO_new_mem_buf(buf, (int)len)) == NULL)
		goto out;
	k = private ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) :
		      PEM_read_bio_PUBKEY(b, NULL, NULL, NULL);
	if (k == NULL || EVP_PKEY_get_id(k) != EVP_PKEY_ED25519) {
		fprintf(stderr, "egressctl: %s: not an Ed25519 %s key (PEM)\n",
		    path, private ? "private" : "public");
		EVP_PKEY_free(k);
		k = NULL;
	}
out:
	BIO_free(b);
	if (buf != NULL)
		explicit_bzero(buf, len);
	free(buf);
	return k;
}

static int
cmd_sign(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	const char *key = NULL, *pkgdir;
	char mpath[4096], spath[4096], err[512], fp[40];
	char *man = NULL, *b64 = NULL;
	size_t mlen = 0, siglen = ED25519_SIG_LEN;
	unsigned char sig[ED25519_SIG_LEN];
	struct conf_manifest *m = NULL;
	struct conf_errors errs = { 0 };
	EVP_PKEY *k = NULL;
	EVP_MD_CTX *md = NULL;
	int ch, n, rc = CTL_EXIT_ERROR;
	size_t i;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "+k:", longopts, NULL)) != -1) {
		if (ch != 'k') {
			manifest_usage(stderr);
			return CTL_EXIT_USAGE;
		}
		key = optarg;
	}
	if (key == NULL || argc - optind != 1) {
		manifest_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	pkgdir = argv[optind];
	(void)snprintf(mpath, sizeof(mpath), "%s/manifest.ini", pkgdir);
	(void)snprintf(spath, sizeof(spath), "%s/manifest.ini.sig", pkgdir);
	if (pkg_read_file(mpath, CONF_MANIFEST_MAX, &man, &mlen) != 0) {
		fprintf(stderr,
		    "egressctl: %s: cannot read (at most %d "
		    "bytes, a regular file)\n",
		    mpath, CONF_MANIFEST_MAX);
		goto out;
	}
	/* Never sign what no broker would accept. */
	if (conf_manifest_parse(mpath, man, mlen, NULL, 0, CONF_SIG_DISABLED,
		NULL, &m, &errs) != 0) {
		for (i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		fprintf(stderr,
		    "egressctl: %s: manifest refused; not "
		    "signing\n",
		    mpath);
		goto out;
	}
	if ((k = load_key(key, 1)) == NULL)
		goto out;
	if ((md = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestSignInit(md, NULL, NULL, NULL, k) != 1 ||
	    EVP_DigestSign(md, sig, &siglen, (unsigned char *)man, mlen) !=
		1 ||
	    siglen != ED25519_SIG_LEN) {
		fprintf(stderr, "egressctl: signing failed\n");
		goto out;
	}
	if ((b64 = malloc(4 * ((ED25519_SIG_LEN + 2) / 3) + 2)) == NULL)
		goto out;
	n = EVP_EncodeBlock((unsigned char *)b64, sig, ED25519_SIG_LEN);
	b64[n] = '\n';
	b64[n + 1] = '\0';
	if (iniedit_write_atomic(spath, b64, (size_t)n + 1, 0644, err,
		sizeof(err)) != 0) {
		fprintf(stderr, "egressctl: %s\n", err);
		goto out;
	}
	key_fingerprint(k, fp, sizeof(fp));
	printf("signed %s %s: wrote %s\n", m->name, m->version, spath);
	printf("key fingerprint: sha256:%s\n", fp);
	rc = CTL_EXIT_OK;
out:
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(k);
	conf_manifest_free(m);
	conf_errors_done(&errs);
	free(man);
	free(b64);
	return rc;
}

/* Decode the one-line base64 signature; return 0 with 64 bytes in sig. */
static int
sig_decode(const char *s, size_t len, unsigned char *sig)
{
	unsigned char out[SIG_FILE_MAX];
	int n;

	while (len > 0 &&
	    (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ' ||
		s[len - 1] == '\t'))
		len--;
	if (len != 88 || s[86] != '=' || s[87] != '=' ||
	    memchr(s, '\n', len) != NULL)
		return -1;
	n = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
	if (n != 66) /* 64 bytes and two padding zeros */
		return -1;
	memcpy(sig, out, ED25519_SIG_LEN);
	return 0;
}

static int
sig_verifies(EVP_PKEY *k, const unsigned char *sig, const char *msg,
    size_t len)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int ok;

	if (md == NULL)
		return 0;
	ok = EVP_DigestVerifyInit(md, NULL, NULL, NULL, k) == 1 &&
	    EVP_DigestVerify(md, sig, ED25519_SIG_LEN,
		(const unsigned char *)msg, len) == 1;
	EVP_MD_CTX_free(md);
	return ok;
}

/* Load each of paths into keys (room for npaths); *n counts those loaded. */
static int
load_keys(const char *const *paths, size_t npaths, EVP_PKEY **keys, size_t *n)
{
	char msg[600];
	size_t i;

	for (i = 0; i < npaths; i++) {
		if (key_file_check(paths[i], msg, sizeof(msg)) != 0) {
			fprintf(stderr, "egressctl: %s\n", msg);
			return -1;
		}
		if ((keys[i] = load_key(paths[i], 0)) == NULL)
			return -1;
		(*n)++;
	}
	return 0;
}

static int
cmd_verify(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *key = NULL, *pkgdir, *status = NULL, *why = "";
	const char *keyv[1] = { NULL };
	char mpath[4096], spath[4096], fp[40] = "";
	char *man = NULL, *sigtxt = NULL, *merr = NULL;
	size_t mlen = 0, slen = 0, i;
	unsigned char sig[ED25519_SIG_LEN];
	struct conf_snapshot *snap = NULL;
	struct conf_keyring *ring = NULL;
	struct conf_manifest *m = NULL;
	struct conf_errors errs = { 0 };
	EVP_PKEY **keys = NULL;
	const char *const *paths;
	size_t nkeys = 0, npaths;
	int ch, json = 0, rc = CTL_EXIT_ERROR, r;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "+k:", longopts, NULL)) != -1) {
		if (ch == 'k')
			key = optarg;
		else if (ch == 'j')
			json = 1;
		else {
			manifest_usage(stderr);
			return CTL_EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		manifest_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	pkgdir = argv[optind];
	(void)snprintf(mpath, sizeof(mpath), "%s/manifest.ini", pkgdir);
	(void)snprintf(spath, sizeof(spath), "%s/manifest.ini.sig", pkgdir);
	if (key != NULL) {
		keyv[0] = key;
		paths = keyv;
		npaths = 1;
	} else {
		if (conf_load(ctx->config_path, &snap, &errs) != 0) {
			for (i = 0; i < errs.n; i++)
				fprintf(stderr, "%s\n", errs.msgs[i]);
			fprintf(stderr,
			    "egressctl: %s: configuration refused "
			    "(or give --key PUB)\n",
			    ctx->config_path);
			rc = CTL_EXIT_CONFIG;
			goto out;
		}
		paths = (const char *const *)snap->trusted_keys;
		npaths = snap->ntrusted_keys;
	}
	/* NOLINTBEGIN(bugprone-sizeof-expression): an array of pointers */
	if ((keys = calloc(npaths ? npaths : 1, sizeof(*keys))) == NULL)
		goto out;
	/* NOLINTEND(bugprone-sizeof-expression) */
	if (load_keys(paths, npaths, keys, &nkeys) != 0)
		goto out;
	if (pkg_read_file(mpath, CONF_MANIFEST_MAX, &man, &mlen) != 0) {
		fprintf(stderr,
		    "egressctl: %s: cannot read (at most %d "
		    "bytes, a regular file)\n",
		    mpath, CONF_MANIFEST_MAX);
		goto out;
	}
	r = pkg_read_file(spath, SIG_FILE_MAX, &sigtxt, &slen);
	if (r == EGRESS_ERR_NOT_FOUND) {
		status = "unsigned";
		why = "no manifest.ini.sig";
	} else if (r != 0 || sig_decode(sigtxt, slen, sig) != 0) {
		status = "invalid";
		why = "manifest.ini.sig is not one line of base64 of a "
		      "64-byte Ed25519 signature";
	} else {
		for (i = 0; i < nkeys; i++)
			if (sig_verifies(keys[i], sig, man, mlen)) {
				key_fingerprint(keys[i], fp, sizeof(fp));
				break;
			}
		if (i < nkeys) {
			status = "valid";
			why = "";
		} else {
			status = "untrusted";
			why = nkeys == 0 ?
			    "no trusted key is configured" :
			    "no trusted key verifies these bytes (signed by "
			    "another key, or the manifest changed after "
			    "signing)";
		}
	}
	/* A valid signature must also be one conf/ accepts in strict mode,
	 * over a manifest it accepts. */
	if (strcmp(status, "valid") == 0) {
		if (conf_keyring_load(paths, npaths, &ring, &errs) != 0 ||
		    conf_manifest_parse(mpath, man, mlen, sigtxt, slen,
			CONF_SIG_STRICT, ring, &m, &errs) != 0) {
			merr = errs.n ? strdup(errs.msgs[0]) : NULL;
			status = "invalid";
			why = merr ? merr : "the manifest is refused";
		}
	}
	if (json) {
		json_t *o = json_object();
		char *s;

		json_object_set_new(o, "package", json_string(pkgdir));
		json_object_set_new(o, "status", json_string(status));
		json_object_set_new(o, "detail", json_string(why));
		if (fp[0] != '\0') {
			char k[64];

			(void)snprintf(k, sizeof(k), "sha256:%s", fp);
			json_object_set_new(o, "key", json_string(k));
		} else
			json_object_set_new(o, "key", json_null());
		s = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		if (s != NULL)
			printf("%s\n", s);
		free(s);
	} else if (strcmp(status, "valid") == 0)
		printf("%s: valid (key sha256:%s)\n", pkgdir, fp);
	else
		printf("%s: %s: %s\n", pkgdir, status, why);
	rc = strcmp(status, "valid") == 0 ? CTL_EXIT_OK : CTL_EXIT_NO;
out:
	for (i = 0; i < nkeys; i++)
		EVP_PKEY_free(keys[i]);
	free(keys);
	conf_manifest_free(m);
	conf_keyring_free(ring);
	conf_snapshot_free(snap);
	conf_errors_done(&errs);
	free(man);
	free(sigtxt);
	free(merr);
	return rc;
}

int
ctl_manifest_main(struct ctl_ctx *ctx, int argc, char **argv)
{
	if (argc < 2) {
		ctl_bad_subcommand("manifest", argc, argv);
		manifest_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "keygen") == 0)
		return cmd_keygen(ctx, argc - 1, argv + 1);
	if (strcmp(argv[1], "sign") == 0)
		return cmd_sign(argc - 1, argv + 1);
	if (strcmp(argv[1], "verify") == 0)
		return cmd_verify(ctx, argc - 1, argv + 1);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		manifest_usage(stdout);
		return CTL_EXIT_OK;
	}
	ctl_bad_subcommand("manifest", argc, argv);
	manifest_usage(stderr);
	return CTL_EXIT_USAGE;
}
