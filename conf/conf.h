/* SPDX-License-Identifier: ISC */
/*
 * conf: the operator's INI file and the plugin manifests it references,
 * parsed with inih into one immutable snapshot. A snapshot is built only
 * from a file that is valid as a whole; a broken configuration yields
 * errors (each "FILE:LINE: [section] key: message") and no snapshot. A
 * broken manifest refuses only its own instances. Manifest signatures are
 * Ed25519 (OpenSSL) over the exact bytes of manifest.ini.
 */
#ifndef EGRESS_CONF_H
#define EGRESS_CONF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"

#define CONF_LINE_MAX		200 /* bytes per line, without the newline */
#define CONF_MANIFEST_MAX	(64 * 1024)
#define CONF_MANIFEST_HOSTS_MAX 1024
#ifndef CONF_DEFAULT_PATH /* the build sets it: SYSCONFDIR/egressd/... */
#define CONF_DEFAULT_PATH "/etc/egressd/egressd.ini"
#endif

/* A list of error messages, each "FILE:LINE: [section] key: message". */
struct conf_errors {
	size_t n;
	char **msgs;
};

/* Free the messages and reset to empty. NULL is a no-op. */
void conf_errors_done(struct conf_errors *e);

/*
 * A new copy of s with every byte outside printable ASCII, and the
 * backslash, as "\xNN", as the messages of struct conf_errors quote
 * what they refuse (so that a backslash always starts an escape). NULL
 * when out of memory.
 */
char *conf_printable(const char *s);

enum conf_sig_mode {
	CONF_SIG_DISABLED = 1,
	CONF_SIG_PERMISSIVE = 2,
	CONF_SIG_STRICT = 3,
};

enum conf_sig_status {
	CONF_SIG_NOT_CHECKED = 1, /* signature_mode = disabled */
	CONF_SIG_VALID = 2,	  /* verified by a trusted key */
	CONF_SIG_UNSIGNED = 3,	  /* no manifest.ini.sig */
	CONF_SIG_UNTRUSTED = 4,	  /* well-formed, no trusted key verifies */
	CONF_SIG_INVALID = 5,	  /* malformed signature file */
};

/* Return "not-checked", "valid", "unsigned", "untrusted", "invalid". */
const char *conf_sig_status_str(enum conf_sig_status s);

/* The fingerprint of a key: "sha256:" and 32 lowercase hex digits, the
 * first 16 bytes of the SHA-256 of the raw 32-byte Ed25519 key. */
#define CONF_FINGERPRINT_LEN 39

struct evp_pkey_st;

/* A parsed manifest. Immutable once returned. */
struct conf_manifest {
	char *path;		    /* as opened */
	char *name;		    /* [plugin] name */
	char *version;		    /* [plugin] version */
	unsigned permissions;	    /* [plugin] permissions */
	struct policy_grant *hosts; /* [egress] hosts (never NULL) */
	int operator_defined;	    /* [egress] operator_defined */
	enum conf_sig_status sig;
	char signer[CONF_FINGERPRINT_LEN + 1]; /* valid: whose key; else "" */
	unsigned char sha256[32];	       /* of the manifest bytes */
	int name_line;			       /* line of [plugin] name */
};

/* Trusted Ed25519 public keys. */
struct conf_keyring;

#define CONF_SIG_LEN	  64   /* bytes of an Ed25519 signature */
#define CONF_SIG_B64_LEN  88   /* its base64 text, without newline */
#define CONF_SIG_FILE_MAX 1024 /* bytes of manifest.ini.sig read */
#define CONF_NAME_MAX	  64   /* instance, plugin and version names */
#define CONF_TOKEN_MIN	  16   /* bytes of a proxy_token_file token */
#define CONF_TOKEN_MAX	  256
#define CONF_METHOD_MAX	  32		/* bytes of an extra_methods item */
#define CONF_MEMORY_MIN	  (16ULL << 20) /* [broker] memory_max */
#define CONF_MEMORY_MAX	  (64ULL << 30)
#define CONF_METHODS_MAX  32 /* items of [limits] extra_methods */

/*
 * Load the PEM public key (Ed25519 only) of each of the given files: one
 * key a file, which neither group nor others may write. Return 0 and
 * write *ret, or a negative error with the file named in reterr.
 */
int conf_keyring_load(const char *const *paths, size_t n,
    struct conf_keyring **ret, struct conf_errors *reterr);

/* Free the keyring. NULL is a no-op. */
void conf_keyring_free(struct conf_keyring *k);

/* Return the number of keys in k (NULL counts as empty). */
size_t conf_keyring_count(const struct conf_keyring *k);

/*
 * Check the signature text sig (the bytes of manifest.ini.sig, siglen of
 * them; NULL: there is none) over exactly the len bytes of buf against
 * every key of keys (NULL: no trusted key). Return CONF_SIG_UNSIGNED (sig
 * NULL), CONF_SIG_INVALID (not one line of padded base64 of 64 bytes with
 * an optional trailing newline), CONF_SIG_UNTRUSTED (well-formed, but no
 * key verifies it: a wrong key or changed bytes) or CONF_SIG_VALID. Never
 * CONF_SIG_NOT_CHECKED: the mode is the caller's business.
 */
enum conf_sig_status conf_sig_verify(const char *buf, size_t len,
    const char *sig, size_t siglen, const struct conf_keyring *keys);

/*
 * conf_sig_verify, also writing into signer the fingerprint of the key
 * that verified it (CONF_SIG_VALID), or "" (signer may be NULL).
 */
enum conf_sig_status conf_sig_verify_by(const char *buf, size_t len,
    const char *sig, size_t siglen, const struct conf_keyring *keys,
    char *signer);

/* Write k's fingerprint into out (CONF_FINGERPRINT_LEN + 1 bytes). Return
 * 0, or -1 (not a raw public key: out is ""). */
int conf_key_fingerprint(const struct evp_pkey_st *k, char *out);

/*
 * Write the manifest.ini.sig text of a raw 64-byte Ed25519 signature
 * (CONF_SIG_B64_LEN base64 characters and a NUL, no newline: append one
 * when writing the file) into buf of size n. Return the length, or
 * EGRESS_ERR_TOO_BIG when n < CONF_SIG_B64_LEN + 1.
 */
int conf_sig_encode(const unsigned char sig[CONF_SIG_LEN], char *buf,
    size_t n);

/*
 * Parse the manifest at path (at most CONF_MANIFEST_MAX bytes, at most
 * CONF_MANIFEST_HOSTS_MAX hosts) and check PATH.sig under mode with keys
 * (keys may be NULL: then any signature is untrusted). In strict mode an
 * unsigned or untrusted manifest is refused; in permissive mode an invalid
 * or untrusted signature is refused and unsigned is accepted. Return 0 and
 * write *ret, or a negative error with file:line messages in reterr.
 */
int conf_manifest_load(const char *path, enum conf_sig_mode mode,
    const struct conf_keyring *keys, struct conf_manifest **ret,
    struct conf_errors *reterr);

/* Same as conf_manifest_load over bytes already read; sig may be NULL
 * (unsigned). path names the input in messages. */
int conf_manifest_parse(const char *path, const char *buf, size_t len,
    const char *sig, size_t siglen, enum conf_sig_mode mode,
    const struct conf_keyring *keys, struct conf_manifest **ret,
    struct conf_errors *reterr);

/* Free the manifest. NULL is a no-op. */
void conf_manifest_free(struct conf_manifest *m);

/* [tls.profiles.NAME] bounds. */
#define CONF_ALPN_MAX	      16  /* protocols in a profile's alpn */
#define CONF_ALPN_WIRE_MAX    255 /* bytes of its wire form */
#define CONF_TLS_PROFILES_MAX 64  /* profiles an entry may list */

/*
 * One [tls.profiles.NAME] section: the trust material a request of an
 * instance that lists it may select. It never names a destination.
 */
struct evp_pkey_st;

struct conf_tls_profile {
	char *name;
	char *ca_file;	 /* resolved; NULL: [tls] ca_file, else the system
			    store */
	char *cert_file; /* client certificate chain (PEM), or NULL */
	char *key_file;	 /* its private key (PEM, owner-only), or NULL;
			    set exactly when cert_file is */
	/* The key as the configuration read key_file, through its checks
	 * (mode, owner, no final symlink); contexts are built from it, never
	 * from the file read again. NULL when key_file is. */
	struct evp_pkey_st *key;
	int min_version; /* 12 (TLS 1.2, the default) or 13 (TLS 1.3) */
	/* ALPN protocols offered on tls streams, in wire form (length
	 * prefixed); alpn_len 0: none. */
	unsigned char alpn[CONF_ALPN_WIRE_MAX];
	size_t alpn_len;
	int line; /* of the section header */
};

/* One [plugins.entries.NAME] section. */
struct conf_instance {
	char *name;
	char *plugin;
	char *manifest_path;	      /* resolved against the config folder */
	unsigned granted_permissions; /* the entry's permissions */
	struct policy_grant *hosts;   /* egress_hosts (never NULL) */
	struct policy_grant *allow_private;  /* egress_allow_private */
	struct policy_grant *allow_loopback; /* egress_allow_loopback */
	char *socket_owner;		     /* NULL when unset */
	char *socket_group;
	char *proxy_listen; /* loopback ADDR:PORT of the proxy front, or
			       NULL */
	char *proxy_token;  /* its token (proxy_token_file's content), in
			       CONF_TOKEN_MAX + 1 bytes, zero past it */
	/* The entry's tcp/tls stream limits; 0: [limits]'s. */
	unsigned stream_idle_timeout_ms;
	unsigned stream_max_lifetime_ms;
	char **tls_profiles; /* tls_profiles: the [tls.profiles.NAME] names
				its requests may select */
	size_t ntls_profiles;
	int tls_inspect; /* tls_inspect = true: CONNECT tunnels with a
			    matching SNI are terminated and their requests
			    decided one by one */
	int line;	 /* of the section header */
	/* The manifest, or NULL when refused; then manifest_error says why
	 * (file:line messages joined with "; "). */
	struct conf_manifest *manifest;
	char *manifest_error;
	/* The view the verdict takes; its pointers borrow from above. */
	struct policy_instance policy;
	/* Indices in the snapshot's files[] of the manifest and its .sig. */
	size_t file_idx[2];
};

/* The largest [broker] busy_poll_us and adaptive_poll_us, and the
 * latter's default. */
#define CONF_BUSY_POLL_MAX_US	1000
#define CONF_ADAPTIVE_POLL_US	50
/* [limits] websocket_max_message_bytes: bounds and default (16 MiB). */
#define CONF_WS_MESSAGE_MIN	1024
#define CONF_WS_MESSAGE_MAX	(256 * 1024 * 1024)
#define CONF_WS_MESSAGE_DEFAULT (16 * 1024 * 1024)

/* The whole configuration. Every field is read-only after conf_load, but
 * files[].racy, which the staleness checks settle (single-threaded). */
struct conf_snapshot {
	char *path;	     /* the configuration file */
	char *dir;	     /* its folder */
	uint64_t generation; /* set by the caller that swaps it in */

	struct policy_nat64_list nat64; /* [security] nat64_prefixes */
	enum conf_sig_mode sig_mode;	/* [plugins.security] */
	char **trusted_keys;		/* resolved paths */
	size_t ntrusted_keys;
	struct conf_keyring *keyring;
	char *package_dir;		       /* [plugins] package_dir */
	unsigned max_connections_per_instance; /* [plugins.limits] */

	/* [broker] */
	char *instance_socket_dir;
	char *control_socket;
	char *log_path; /* NULL: stderr */
	unsigned drain_timeout_ms;
	unsigned busy_poll_us;	   /* 0: off (docs/configuration.md) */
	unsigned adaptive_poll_us; /* 0: off */
	uint64_t memory_max;	   /* bytes; 0: derived by the broker */
	uid_t *control_uids;
	size_t ncontrol_uids;
	gid_t *control_gids;
	size_t ncontrol_gids;

	/* [resolver] */
	char **resolver_servers; /* "ADDR[:PORT]" / "[ADDR]:PORT" */
	size_t nresolver_servers;
	unsigned resolver_timeout_ms;

	/* [limits] */
	unsigned connect_timeout_ms;
	unsigned first_byte_timeout_ms;
	unsigned between_bytes_timeout_ms;
	unsigned stream_idle_timeout_ms;    /* tcp/tls: no byte either way */
	size_t websocket_max_message_bytes; /* one message, each way */
	unsigned stream_max_lifetime_ms;    /* tcp/tls: from connected */
	char **extra_methods;		    /* request methods beyond the
					   standard set (tokens) */
	size_t nextra_methods;

	/* [tls] */
	char *ca_file;	       /* NULL: system store */
	char *inspect_ca_cert; /* the inspection CA (resolved; the default
				  CONF_INSPECT_CA_CERT when unset) */
	char *inspect_ca_key;  /* its key (owner-only) */
	char *inspect_ca_pem;  /* the CA certificate as PEM, when an entry
				  has tls_inspect; else NULL */
	struct conf_tls_profile *tls_profiles; /* sorted by name */
	size_t ntls_profiles;

	/* [metrics] */
	/* [upstream_proxy]: every connection goes through this parent
	 * HTTP proxy when upstream_proxy_url is not NULL. */
	char *upstream_proxy_url;
	struct policy_addr upstream_proxy_addr;
	uint16_t upstream_proxy_port;
	char *upstream_proxy_auth; /* "Basic BASE64", or NULL */
	char *metrics_listen;	   /* NULL: no scrape endpoint; else a
					   loopback ADDR:PORT, [::1]:PORT or
					   an absolute Unix socket path */

	struct conf_instance *instances; /* sorted by name */
	size_t ninstances;

	/* Every file the snapshot was built from (the configuration, then
	 * each manifest and its .sig path), with the stat identity seen when
	 * it was read, for cheap change detection. */
	struct conf_file_id {
		char *path;
		int exists;
		dev_t dev;
		ino_t ino;
		off_t size;
		mode_t mode; /* as read: who may write it */
		int64_t mtime_ns;
		int64_t ctime_ns;
		/* Changed so recently (within the file system's timestamp
		 * granularity, taken as 1 s) that a same-size rewrite could
		 * keep every field above: such a file always counts as
		 * changed, until a later read records it settled ("racy
		 * git"). For a file that was read, digest is the SHA-256 of
		 * the bytes read: a racy file whose identity is unchanged
		 * counts as changed only if its bytes now differ, so a
		 * recent edit costs a re-read and a hash per check, not a
		 * re-parse. */
		int racy;
		/* Read by every decision (the configuration, trusted keys),
		 * not by one instance's only (its manifest and .sig). */
		int shared;
		int has_digest;
		unsigned char digest[32];
	} * files;
	size_t nfiles;
};

/*
 * From now on, a private key file (a TLS profile's key_file, the
 * inspection CA's key) and a secret file (a proxy_token_file, the
 * [upstream_proxy] credentials_file) must also be owned by uid. The
 * broker calls it with its own uid before it loads its configuration,
 * so that a file another user owns, and so may read or rewrite, is
 * refused even by a broker that runs as root. Without it (egressctl and
 * --check-config, which may run as another user than the broker's) the
 * owner is not checked: only the mode.
 */
void conf_key_owner_require(uid_t uid);

/*
 * Read and validate the configuration at path and every manifest it
 * references. Return 0 and write *ret on success (manifests that fail are
 * recorded per instance, not as errors). On any configuration error
 * return EGRESS_ERR_INVALID (or _IO, _NOMEM) with every message in
 * reterr, and write nothing.
 */
int conf_load(const char *path, struct conf_snapshot **ret,
    struct conf_errors *reterr);

/*
 * Read only [broker] control_socket from the configuration at path, even
 * when other parts of the file are invalid (so that a tool can still reach
 * the running broker). Write *ret (malloc'd, resolved against the file's
 * folder; the default when the file has no valid control_socket line) and
 * *ret_found (1 when the line was read), and add every error of the file to
 * reterr: the file is invalid when reterr->n > 0. Return 0, or a negative
 * error when the file cannot be read (the reason in reterr).
 */
int conf_peek_control_socket(const char *path, char **ret, int *ret_found,
    struct conf_errors *reterr);

/*
 * Read only the inspection CA's paths from the configuration at path
 * ([tls] inspect_ca_cert and inspect_ca_key, else CONF_INSPECT_CA_CERT and
 * CONF_INSPECT_CA_KEY in its folder), even when other parts of the file
 * are invalid (the CA may be what is missing). Write *ret_cert and
 * *ret_key (malloc'd) and add every error of the file to reterr. Return
 * 0, or a negative error when the file cannot be read.
 */
int conf_peek_inspect_ca(const char *path, char **ret_cert, char **ret_key,
    struct conf_errors *reterr);

/* Same over the bytes of a configuration; path and its folder are used for
 * messages and for resolving relative paths. */
int conf_load_buffer(const char *path, const char *buf, size_t len,
    struct conf_snapshot **ret, struct conf_errors *reterr);

/* Free the snapshot and everything it owns. NULL is a no-op. */
void conf_snapshot_free(struct conf_snapshot *s);

/*
 * Find the [tls.profiles.NAME] section whose name is the len bytes at
 * name (binary search). Return NULL when absent.
 */
const struct conf_tls_profile *
conf_tls_profile_find(const struct conf_snapshot *s, const char *name,
    size_t len);

/*
 * Answer whether instance ci lists the profile named by the len bytes at
 * name in its tls_profiles. Return 1 or 0 (0 for a NULL ci).
 */
int conf_instance_has_tls_profile(const struct conf_instance *ci,
    const char *name, size_t len);

/* The inspection CA's files when [tls] does not name them, in the
 * configuration's folder. */
#define CONF_INSPECT_CA_CERT "inspect-ca.pem"
#define CONF_INSPECT_CA_KEY  "inspect-ca.key"

struct x509_st;

/*
 * Read the inspection CA: the first PEM certificate of cert_path, which
 * must be a CA certificate (basicConstraints CA:TRUE) allowed to sign
 * certificates, and the one unencrypted PEM private key of key_path, a
 * regular file only its owner may access (opened without following a
 * final symlink), matching it. Write *ret_cert and *ret_key (the caller
 * frees them) and return 0; else return EGRESS_ERR_INVALID with *ret_file
 * the path at fault and *ret_why what is wrong with it (static text,
 * never a byte of the key). The key's bytes are wiped once parsed.
 */
int conf_inspect_ca_read(const char *cert_path, const char *key_path,
    struct x509_st **ret_cert, struct evp_pkey_st **ret_key,
    const char **ret_file, const char **ret_why);

/* Answer whether an entry of s has tls_inspect = true. */
int conf_has_inspect(const struct conf_snapshot *s);

/* Find an instance by name (binary search). Return NULL when absent. */
const struct conf_instance *conf_instance_find(const struct conf_snapshot *s,
    const char *name);

/* The idle timeout and the maximum lifetime of a tcp/tls stream of ci
 * (NULL: no instance), in *ret_idle and *ret_life: its entry's
 * stream_idle_timeout_ms and stream_max_lifetime_ms where set, else
 * [limits]'s. */
void conf_stream_limits(const struct conf_snapshot *s,
    const struct conf_instance *ci, unsigned *ret_idle, unsigned *ret_life);

/*
 * Answer whether any file the snapshot was built from changed since it was
 * read (inode, size, mtime, ctime, or existence). A file that had changed
 * less than a second before it was read (racy: a same-size rewrite within
 * the same timestamp tick would be invisible) is also re-read and compared
 * with the digest of its bytes: changed bytes are a change, the same bytes
 * are not, so no re-parse follows; once such a file's identity is older
 * than the racy window and its bytes still match, it is marked settled and
 * later checks are one stat(2) again. Return 1 or 0. A snapshot from
 * conf_load_buffer() does not record the configuration itself, only the
 * manifests, signatures and keys it read.
 */
int conf_snapshot_is_stale(struct conf_snapshot *s);

/*
 * The same, over only the files a decision for the named instance reads:
 * the shared ones (the configuration, trusted keys) and that instance's
 * manifest and signature, so that a request costs a few stat(2) calls
 * however many instances there are. Another instance's edited manifest is
 * seen by that instance's next request. An instance the snapshot does not
 * have (or NULL) checks every file.
 */
int conf_snapshot_is_stale_for(struct conf_snapshot *s, const char *instance);

/* Return the configuration path to use: arg if not NULL, else
 * $EGRESSD_CONFIG, else CONF_DEFAULT_PATH. */
const char *conf_default_path(const char *arg);

/* The libpsl-backed callback for policy_entry_parse() (ICANN section, no
 * star rule). ctx is ignored; pass NULL. */
int conf_psl_is_public_suffix(void *ctx, const char *domain);

#endif /* EGRESS_CONF_H */
