/* SPDX-License-Identifier: ISC */
/*
 * `egressctl ca init|show`: the inspection CA that entries with
 * tls_inspect = true are terminated with ([tls] inspect_ca_cert and
 * inspect_ca_key, else inspect-ca.pem and inspect-ca.key in the
 * configuration's folder). init makes an EC P-256 CA (basicConstraints
 * CA:TRUE with pathlen 0, keyUsage keyCertSign and cRLSign, ten years)
 * and writes its key only its owner may read, owned by the broker's
 * user; show prints where it is and its SHA-256 fingerprint.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "broker/ctl/ctl.h"
#include "conf/conf.h"

#define CA_DAYS	      3650
#define CA_USER	      "egressd" /* the broker's user (egressd.service) */
#define CA_SUBJECT_CN "egressd inspection CA"

static void
ca_usage(FILE *f)
{
	fprintf(f,
	    "usage: egressctl [-c FILE] ca init [--force] [--owner USER]\n"
	    "       egressctl [-c FILE] ca show\n");
}

/* The CA's paths from the configuration (read even when the rest of it
 * is refused: the CA may be what it lacks). */
static int
ca_paths(struct ctl_ctx *ctx, char **ret_cert, char **ret_key)
{
	struct conf_errors errs = { 0 };
	size_t i;

	if (conf_peek_inspect_ca(ctx->config_path, ret_cert, ret_key, &errs) !=
	    0) {
		for (i = 0; i < errs.n; i++)
			fprintf(stderr, "egressctl: %s\n", errs.msgs[i]);
		conf_errors_done(&errs);
		return -1;
	}
	conf_errors_done(&errs);
	return 0;
}

static int
ca_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = e != NULL && X509_add_ext(x, e, -1) == 1;

	X509_EXTENSION_free(e);
	return ok;
}

static X509 *
ca_make(EVP_PKEY *key)
{
	unsigned char serial[16];
	char host[256], cn[320];
	X509V3_CTX v3;
	X509_NAME *n = NULL;
	BIGNUM *bn = NULL;
	X509 *x = NULL;
	time_t now = time(NULL);
	int ok = 0;

	if (gethostname(host, sizeof(host)) != 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	(void)snprintf(cn, sizeof(cn), "%s%s%.30s", CA_SUBJECT_CN,
	    host[0] != '\0' ? " " : "", host);
	if ((x = X509_new()) == NULL || X509_set_version(x, 2) != 1 ||
	    RAND_bytes(serial, sizeof(serial)) != 1)
		goto out;
	serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x01);
	if ((bn = BN_bin2bn(serial, sizeof(serial), NULL)) == NULL ||
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL ||
	    X509_time_adj_ex(X509_getm_notBefore(x), 0, -3600, &now) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), CA_DAYS, 0, &now) ==
		NULL ||
	    (n = X509_NAME_new()) == NULL ||
	    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8,
		(const unsigned char *)cn, -1, -1, 0) != 1 ||
	    X509_set_subject_name(x, n) != 1 ||
	    X509_set_issuer_name(x, n) != 1 || X509_set_pubkey(x, key) != 1)
		goto out;
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	if (!ca_ext(x, &v3, NID_basic_constraints,
		"critical,CA:TRUE,pathlen:0") ||
	    !ca_ext(x, &v3, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    !ca_ext(x, &v3, NID_subject_key_identifier, "hash") ||
	    !ca_ext(x, &v3, NID_authority_key_identifier, "keyid:always") ||
	    X509_sign(x, key, EVP_sha256()) <= 0)
		goto out;
	ok = 1;
out:
	BN_free(bn);
	X509_NAME_free(n);
	if (!ok) {
		X509_free(x);
		x = NULL;
	}
	return x;
}

/* Write the PEM of x or key to a new file beside path, named from the
 * template tmp (PATH.XXXXXX, filled in), owned by uid/gid with mode.
 * Return 0, or -1 (said; no file left). */
static int
ca_write(char *tmp, const char *path, X509 *x, EVP_PKEY *key, mode_t mode,
    uid_t uid, gid_t gid)
{
	FILE *f = NULL;
	int fd, ok = 0;

	errno = 0;
	/* A name of its own (mkostemp: O_EXCL, mode 0600), so that two
	 * inits at once never write or remove each other's files. */
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		fprintf(stderr, "egressctl: ca init: cannot write %s: %s\n",
		    path, strerror(errno));
		return -1;
	}
	if (fchmod(fd, mode) != 0 ||
	    (uid != (uid_t)-1 && fchown(fd, uid, gid) != 0))
		goto out;
	if ((f = fdopen(fd, "w")) == NULL)
		goto out;
	fd = -1;
	if (x != NULL ?
		PEM_write_X509(f, x) != 1 :
		PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) != 1)
		goto out;
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		goto out;
	if (fclose(f) != 0) {
		f = NULL;
		goto out;
	}
	f = NULL;
	ok = 1;
out:
	if (!ok) {
		fprintf(stderr, "egressctl: ca init: cannot write %s: %s\n",
		    path, errno != 0 ? strerror(errno) : "OpenSSL failed");
		(void)unlink(tmp);
	}
	if (f != NULL)
		(void)fclose(f);
	if (fd >= 0)
		(void)close(fd);
	ERR_clear_error();
	return ok ? 0 : -1;
}

/*
 * Put the written files in place. With force, rename each over its
 * place. Without, link each to its place: link() refuses an existing
 * name atomically, so a CA that appears after any earlier look is never
 * replaced, and the key linked before a refused certificate is taken
 * back, so nothing is half-installed. Return 0, 1 (a file exists: said)
 * or -1 (said). The temporary files are gone on return.
 */
static int
ca_install(const char *ktmp, const char *key, const char *ctmp,
    const char *cert, int force)
{
	const char *bad = NULL;
	int rc = -1, exists = 0;

	if (force) {
		if (rename(ktmp, key) != 0)
			bad = key;
		else if (rename(ctmp, cert) != 0)
			bad = cert;
		else
			rc = 0;
	} else if (link(ktmp, key) != 0) {
		bad = key;
		exists = errno == EEXIST;
	} else if (link(ctmp, cert) != 0) {
		bad = cert;
		exists = errno == EEXIST;
		(void)unlink(key);
	} else
		rc = 0;
	if (exists) {
		fprintf(stderr,
		    "egressctl: ca init: %s already exists; --force replaces "
		    "the CA (every client must then trust the new one)\n",
		    bad);
		rc = 1;
	} else if (bad != NULL)
		fprintf(stderr, "egressctl: ca init: cannot write %s: %s\n",
		    bad, strerror(errno));
	(void)unlink(ktmp);
	(void)unlink(ctmp);
	return rc;
}

static void
ca_fingerprint(X509 *x, char *buf, size_t n)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0, i;
	size_t o;

	o = (size_t)snprintf(buf, n, "sha256:");
	if (X509_digest(x, EVP_sha256(), md, &len) != 1)
		len = 0;
	for (i = 0; i < len && o + 3 <= n; i++, o += 2)
		(void)snprintf(buf + o, n - o, "%02x", md[i]);
}

static int
ca_init(struct ctl_ctx *ctx, int force, const char *owner)
{
	char *cert = NULL, *key = NULL, fp[80], ktmp[4200], ctmp[4200];
	struct passwd *pw = NULL;
	struct stat sb;
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	EVP_PKEY *pk = NULL;
	X509 *x = NULL;
	int rc = CTL_EXIT_ERROR;

	if (ca_paths(ctx, &cert, &key) != 0)
		return CTL_EXIT_CONFIG;
	if (owner != NULL || geteuid() == 0) {
		errno = 0;
		pw = getpwnam(owner != NULL ? owner : CA_USER);
		if (pw == NULL && owner != NULL) {
			fprintf(stderr, "egressctl: ca init: no user '%s'\n",
			    owner);
			rc = CTL_EXIT_USAGE;
			goto out;
		}
		if (pw != NULL) {
			uid = pw->pw_uid;
			gid = pw->pw_gid;
		}
	}
	/* A quick refusal before the key is made; ca_install's is the one
	 * that holds when the files appear in between. */
	if (!force && (lstat(cert, &sb) == 0 || lstat(key, &sb) == 0)) {
		fprintf(stderr,
		    "egressctl: ca init: %s already exists; --force replaces "
		    "the CA (every client must then trust the new one)\n",
		    lstat(cert, &sb) == 0 ? cert : key);
		rc = CTL_EXIT_NO;
		goto out;
	}
	if ((size_t)snprintf(ktmp, sizeof(ktmp), "%s.XXXXXX", key) >=
		sizeof(ktmp) ||
	    (size_t)snprintf(ctmp, sizeof(ctmp), "%s.XXXXXX", cert) >=
		sizeof(ctmp)) {
		fprintf(stderr, "egressctl: ca init: path too long\n");
		goto out;
	}
	if ((pk = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")) == NULL ||
	    (x = ca_make(pk)) == NULL) {
		fprintf(stderr, "egressctl: ca init: OpenSSL failed\n");
		goto out;
	}
	if (ca_write(ktmp, key, NULL, pk, 0600, uid, gid) != 0)
		goto out;
	if (ca_write(ctmp, cert, x, NULL, 0644, (uid_t)-1, (gid_t)-1) != 0) {
		(void)unlink(ktmp);
		goto out;
	}
	switch (ca_install(ktmp, key, ctmp, cert, force)) {
	case 0:
		break;
	case 1:
		rc = CTL_EXIT_NO;
		goto out;
	default:
		goto out;
	}
	ca_fingerprint(x, fp, sizeof(fp));
	printf("certificate %s\nkey %s (mode 0600, owner %s)\n"
	       "fingerprint %s\n",
	    cert, key, pw != NULL ? pw->pw_name : "the caller", fp);
	rc = CTL_EXIT_OK;
out:
	ERR_clear_error();
	X509_free(x);
	EVP_PKEY_free(pk);
	free(cert);
	free(key);
	return rc;
}

static int
ca_show(struct ctl_ctx *ctx)
{
	char *cert = NULL, *key = NULL, fp[80];
	FILE *f = NULL;
	X509 *x = NULL;
	int rc = CTL_EXIT_NO;

	if (ca_paths(ctx, &cert, &key) != 0)
		return CTL_EXIT_CONFIG;
	if ((f = fopen(cert, "re")) == NULL ||
	    (x = PEM_read_X509(f, NULL, NULL, NULL)) == NULL) {
		fprintf(stderr,
		    "egressctl: ca show: %s: %s (egressctl ca init writes "
		    "it)\n",
		    cert, f == NULL ? strerror(errno) : "no PEM certificate");
		goto out;
	}
	ca_fingerprint(x, fp, sizeof(fp));
	printf("certificate %s\nkey %s\nfingerprint %s\n", cert, key, fp);
	rc = CTL_EXIT_OK;
out:
	ERR_clear_error();
	if (f != NULL)
		(void)fclose(f);
	X509_free(x);
	free(cert);
	free(key);
	return rc;
}

int
ctl_ca_main(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "owner", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *owner = NULL;
	int force = 0, init, c;

	if (argc < 2 ||
	    (strcmp(argv[1], "init") != 0 && strcmp(argv[1], "show") != 0)) {
		ctl_bad_subcommand("ca", argc, argv);
		ca_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	init = strcmp(argv[1], "init") == 0;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			force = 1;
			break;
		case 'o':
			owner = optarg;
			break;
		case 'h':
			ca_usage(stdout);
			return CTL_EXIT_OK;
		default:
			fprintf(stderr, "egressctl: ca %s: bad option\n",
			    argv[1]);
			ca_usage(stderr);
			return CTL_EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || (!init && (force || owner != NULL))) {
		fprintf(stderr, "egressctl: ca %s: unexpected argument\n",
		    argv[1]);
		ca_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	return init ? ca_init(ctx, force, owner) : ca_show(ctx);
}
