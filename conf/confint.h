/* SPDX-License-Identifier: ISC */
/*
 * conf internals shared by ini.c, config.c, manifest.c and sig.c: error
 * collection, the line-bounded INI reader over inih's ini_parse_stream with
 * a per-section key schema (scalars once, lists accumulate), list
 * splitting, decimal integers, and bounded file reads with stat identity.
 * Not installed; only conf/ and its unit tests include it.
 */
#ifndef EGRESS_CONF_CONFINT_H
#define EGRESS_CONF_CONFINT_H

#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

/* At most this many messages are kept per conf_errors; one more says how
 * many were left out (a hostile manifest cannot buy megabytes of text). */
#define CONF_ERRORS_MAX 100

/* Longest key name the reader accepts (inih keeps 50 bytes of a name for
 * continuation lines; every known key is far shorter). */
#define CONF_KEY_MAX	48

/*
 * Append one message built from fmt. Never fails loudly: on out-of-memory
 * the message is dropped and e->oom is not tracked (the caller's return
 * value already fails). Return EGRESS_ERR_INVALID, for "return
 * conf_errors_addf(...)" convenience.
 */
int conf_errors_addf(struct conf_errors *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Move every message of src to the end of dst; src ends empty. */
void conf_errors_move(struct conf_errors *dst, struct conf_errors *src);

/* Return the messages joined with "; " (malloc'd), or NULL on OOM. An
 * empty list gives "". */
char *conf_errors_join(const struct conf_errors *e);

/* ---- Lists ------------------------------------------------------------- */

struct conf_item {
	char *s;
	int line;
};

struct conf_list {
	size_t n;
	size_t cap;
	struct conf_item *v;
};

/*
 * Split value into items on commas and whitespace and append them with
 * line. An empty value adds nothing. An empty item (a leading, doubled or
 * trailing comma) is an error: return EGRESS_ERR_INVALID with a message in
 * reterr (the list is unchanged), or EGRESS_ERR_NOMEM.
 */
int conf_list_add_value(struct conf_list *l, const char *value, int line,
    char *reterr, size_t errlen);

/* Free the items and reset to empty. */
void conf_list_done(struct conf_list *l);

/* ---- Schema and reader ------------------------------------------------- */

struct conf_keydef {
	const char *name;
	int list; /* 1: a list key (accumulates); 0: a scalar */
};

/* The value of one key in one section, as written. */
struct conf_val {
	int line;	       /* first line the key was given on; 0: unset */
	char *str;	       /* a scalar's value */
	struct conf_list list; /* a list's items */
};

/* One section as written: its name, header line and values, indexed like
 * its key table. */
struct conf_sec {
	char *name;
	int line;
	const struct conf_keydef *keys; /* NULL-name terminated */
	size_t nkeys;
	struct conf_val *vals;
};

/* Initialise sec for keys (copying name). Return 0 or EGRESS_ERR_NOMEM. */
int conf_sec_init(struct conf_sec *sec, const char *name, int line,
    const struct conf_keydef *keys);
/* Free what conf_sec_init made. A zeroed sec is a no-op. */
void conf_sec_done(struct conf_sec *sec);

/* Return the value slot of key in sec, or NULL when key is not in its
 * table. */
struct conf_val *conf_sec_val(struct conf_sec *sec, const char *key);
const struct conf_val *conf_sec_cval(const struct conf_sec *sec,
    const char *key);

/*
 * Called for every section header the reader sees (also for empty
 * sections, which inih never reports). Return the section's storage, or
 * NULL when the section is refused (the callback adds the message); the
 * keys of a refused section are then skipped without further messages.
 * A section given twice is refused by the reader before the callback runs.
 */
typedef struct conf_sec *(*conf_ini_section_fn)(void *ctx, const char *path,
    const char *name, int line, struct conf_errors *errs);

/*
 * Parse buf (len bytes) as INI through ini_parse_stream: lines over
 * CONF_LINE_MAX bytes, lines with NUL or control bytes, malformed section
 * headers and key lines, unknown keys, scalars given twice or continued,
 * and empty list items are errors "PATH:LINE: [section] key: message".
 * Comments start with ';' or '#' at the start of a line (after blanks), or
 * with ';' after a blank anywhere. Every error of the input is collected
 * in errs. Return 0, EGRESS_ERR_INVALID (errors added) or
 * EGRESS_ERR_NOMEM.
 */
int conf_ini_parse(const char *path, const char *buf, size_t len,
    conf_ini_section_fn section, void *ctx, struct conf_errors *errs);

/* ---- Values ------------------------------------------------------------ */

/*
 * Parse a decimal integer in [min, max]: digits only, no sign, no blanks,
 * no leading zero (except "0" itself). Return 0 and write *ret, or
 * EGRESS_ERR_INVALID.
 */
int conf_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

/*
 * Answer whether s is a safe name: 1 to CONF_NAME_MAX bytes of a-z, 0-9,
 * '.', '_', '-' (with upper: also A-Z, '+', '~'), starting with a letter
 * or digit, without "..". Plugin names and versions become folder names,
 * instance names socket file names. Return 1 or 0.
 */
int conf_name_is_valid(const char *s, int upper);

/*
 * Parse the items of a permissions list into POLICY_PERM_* bits. Every
 * unknown item is an error "PATH:LINE: [section] permissions: ...".
 * Return 0 and write *ret, or EGRESS_ERR_INVALID.
 */
int conf_permissions_parse(const char *path, const char *section,
    const struct conf_list *l, unsigned *ret, struct conf_errors *errs);

/*
 * Parse the items of an entry list (the shared grammar, with the libpsl
 * callback) into a new grant set. Every bad item is an error
 * "PATH:LINE: [section] key: 'item': message". Return 0 and write *ret
 * (caller frees), EGRESS_ERR_INVALID or EGRESS_ERR_NOMEM.
 */
/*
 * Write into buf the A-label spelling of an entry that holds non-ASCII
 * bytes (keeping a leading "*."). Return 0, or -1 when item is ASCII or has
 * no IDNA 2008 spelling. For messages only: it never makes an entry valid.
 */
int conf_idn_suggest(const char *item, char *buf, size_t n);

int conf_grant_parse(const char *path, const char *section, const char *key,
    const struct conf_list *l, struct policy_grant **ret,
    struct conf_errors *errs);

/* ---- Files ------------------------------------------------------------- */

/* Set how recent a change makes a file racy (default 1 s; tests use 0). */
void conf_set_racy_window_ns(int64_t ns);

/* Fill id from the current state of path (exists = 0 when it does not
 * exist). Return 0, or EGRESS_ERR_IO for another stat failure. */
int conf_file_id_stat(const char *path, struct conf_file_id *id);

/*
 * Read the regular file at path, at most max bytes, into a malloc'd
 * buffer (NUL-terminated, *ret_len without it), and record in id (its
 * path not set) the identity of exactly the file read. Return 0;
 * EGRESS_ERR_NOT_FOUND when it does not exist (id->exists = 0);
 * EGRESS_ERR_TOO_BIG over max; EGRESS_ERR_IO (errno set) otherwise.
 */
int conf_read_file(const char *path, size_t max, char **ret_buf,
    size_t *ret_len, struct conf_file_id *id);

/*
 * Record the file at path among s's shared files, its identity taken
 * from a read of at most max bytes (wiped after), so that rewriting it
 * makes the snapshot stale like an edit of the configuration. Return 0,
 * or EGRESS_ERR_NOMEM.
 */
int conf_track_file(struct conf_snapshot *s, const char *path, size_t max);

/* ---- TLS profiles (tlsprof.c, used by config.c) ------------------------ */

#define CONF_TLS_PROFILES_PREFIX "tls.profiles."

/* The keys of a [tls.profiles.NAME] section. */
extern const struct conf_keydef conf_tls_profile_keys[];

/*
 * Build s->tls_profiles from the n parsed [tls.profiles.NAME] sections
 * secs of the file at path (relative paths against dir): check every
 * value and the files they name (readable PEM; a key file only its owner
 * may read, unencrypted, matching its certificate), record those files
 * with conf_track_file(), and add one "FILE:LINE: [section] key: ..."
 * message per problem to errs (never a byte of a key). Return 0, or
 * EGRESS_ERR_NOMEM.
 */
int conf_tls_profiles_build(const char *path, const char *dir,
    struct conf_sec *const *secs, size_t n, struct conf_snapshot *s,
    struct conf_errors *errs);

/*
 * Fill ci->tls_profiles from the entry's tls_profiles list l (section
 * name sec for messages); every name must be a profile of s (built
 * first). Return 0, or EGRESS_ERR_NOMEM.
 */
int conf_tls_profiles_entry(const char *path, const char *sec,
    const struct conf_list *l, const struct conf_snapshot *s,
    struct conf_instance *ci, struct conf_errors *errs);

/* Free s's profiles (in conf_snapshot_free()). */
void conf_tls_profiles_free(struct conf_snapshot *s);

/* ---- Manifests (used by config.c) -------------------------------------- */

/*
 * conf_manifest_load, also recording the identity of the manifest and of
 * PATH.sig as read (ids[0], ids[1]; paths set, malloc'd; the caller frees
 * them even on failure).
 */
int conf_manifest_load_ids(const char *path, enum conf_sig_mode mode,
    const struct conf_keyring *keys, struct conf_manifest **ret,
    struct conf_errors *reterr, struct conf_file_id ids[2]);

/* Record the identity of every key file the keyring was loaded from. */
size_t conf_keyring_nfiles(const struct conf_keyring *k);
const struct conf_file_id *conf_keyring_file(const struct conf_keyring *k,
    size_t i);

/* The largest uid or gid (uid_t)-1 aside, which is no id. */
#define CONF_ID_MAX 4294967294u

/*
 * Value grammar (values.c). Each answers 1 when s is valid, else 0 and
 * (where it takes one) points *why at the reason, for a message.
 */
/* ADDR[:PORT] with IPv4, or [ADDR] / [ADDR]:PORT with IPv6. */
int conf_server_is_valid(const char *s, const char **why);
/* An absolute Unix socket path, or a loopback ADDR:PORT / [::1]:PORT. */
int conf_listen_is_valid(const char *s, const char **why);
/* A user or group: a name, or a numeric id. */
int conf_owner_is_valid(const char *s);
/* A method: 1 to CONF_METHOD_MAX upper-case letters, digits or '-'. */
int conf_method_is_valid(const char *m);

/* Answer whether a secret file (a key, a token, credentials) owned by
 * uid may be used: always, unless conf_key_owner_require() named
 * another owner. */
int conf_secret_owner_ok(uid_t uid);
#define CONF_OWNER_WHY \
	"is owned by another user than the broker's, who may read it; " \
	"chown it to the broker's user"

/*
 * Read the proxy token of an entry from path (secret.c): a regular file
 * that only its owner may read or write (and, in the broker, owned by
 * the broker's user: see conf_key_owner_require()), holding one line of
 * CONF_TOKEN_MIN to CONF_TOKEN_MAX visible ASCII characters (a final
 * newline is dropped). Return the token (the caller frees it; its
 * buffer is CONF_TOKEN_MAX + 1 bytes, zero past the token), or NULL
 * with *why pointing at the reason, for a message.
 */
char *conf_token_read(const char *path, const char **why);

/*
 * Read only [section] key (a fixed section's path value) from the
 * configuration at path, even when other parts of the file are invalid:
 * write *ret (malloc'd, resolved against the file's folder; def, resolved
 * the same way, when the file has no valid such line) and *ret_found (1
 * when the line was read), and add every error of the file to reterr.
 * Return 0, or a negative error when the file cannot be read (the reason
 * in reterr).
 */
int conf_peek_path(const char *path, const char *section, const char *key,
    const char *def, char **ret, int *ret_found, struct conf_errors *reterr);

/* Set ci->tls_inspect from the entry's tls_inspect value v (section sec
 * of the file at path, for messages): true or false, else an error. */
void conf_inspect_entry(const char *path, const char *sec,
    const struct conf_val *v, struct conf_instance *ci,
    struct conf_errors *errs);

/*
 * Resolve the [tls] inspect_ca_cert and inspect_ca_key values cert and key
 * (NULL: unset, CONF_INSPECT_CA_CERT and CONF_INSPECT_CA_KEY in dir) into
 * s, and when an entry of s has tls_inspect, check the CA they name with
 * conf_inspect_ca_read() and record both with conf_track_file(); a problem
 * is one "FILE:LINE: ..." message in errs naming the file. Return 0, or
 * EGRESS_ERR_NOMEM.
 */
int conf_inspect_build(const char *path, const char *dir,
    const struct conf_val *cert, const struct conf_val *key,
    struct conf_snapshot *s, struct conf_errors *errs);

/*
 * Read the unencrypted PEM private key at path (tlsprof.c), a regular
 * file only its owner may access (and owned by the user that
 * conf_key_owner_require() named, if any), opened without following a link, of
 * at most 64 KiB, its bytes wiped once read; when cert is not NULL the
 * key must match it (else the reason is mismatch). Return 0 and write
 * *ret (or free the key when ret is NULL), or -1 with *ret_why the reason
 * (static text that follows the path), or with *ret_why NULL and errno
 * set when the file could not be opened.
 */
int conf_key_read(const char *path, struct x509_st *cert, const char *mismatch,
    struct evp_pkey_st **ret, const char **ret_why);

/* As conf_token_read(), for [upstream_proxy] credentials_file: one line
 * USER:PASSWORD (a non-empty user, then ':'), 3 to CONF_TOKEN_MAX visible
 * ASCII characters. */
char *conf_credentials_read(const char *path, const char **why);

/*
 * Build [upstream_proxy] (parent.c) from its url and credentials_file
 * values (NULL when unset) of the file cpath, paths relative to dir, into
 * s (upstream_proxy_url, _addr, _port, _auth); the credentials file is
 * tracked like a token. Add one "FILE:LINE: [upstream_proxy] key: ..."
 * error per problem. Return 0, or EGRESS_ERR_NOMEM.
 */
int conf_upstream_proxy(const char *cpath, const char *dir,
    const struct conf_val *url, const struct conf_val *cred,
    struct conf_snapshot *s, struct conf_errors *errs);

#endif /* EGRESS_CONF_CONFINT_H */
