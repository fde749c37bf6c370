/* SPDX-License-Identifier: ISC */
/*
 * tlsprof: the TLS client contexts of the [tls.profiles.NAME] sections,
 * kept in the broker and rebuilt at a reload when a profile's settings
 * or one of its files changed (as the [tls] CA file is), and the one
 * selection every TLS consumer (https, tls streams, wss) goes through:
 * which context a request of an instance uses for the profile it named.
 * A profile chooses trust material, never a destination.
 */
#ifndef EGRESS_BROKER_TLSPROF_H
#define EGRESS_BROKER_TLSPROF_H

#include <stddef.h>
#include <stdint.h>

struct broker;
struct conf_snapshot;
struct conf_instance;
struct dial_tls;

/* The reason logged when a request names a profile its instance does
 * not list (decision events, docs/egressd.md). */
#define TLSPROF_REASON_NOT_ALLOWED "tls-profile-not-allowed"

/*
 * Make b's profile contexts follow snapshot s: keep a context whose
 * settings and files (device, inode, size, mtime, ctime, and the digest
 * s recorded of their bytes) are unchanged,
 * build the others (a new trust generation: connections verified under
 * the old one are never reused), free those of profiles s no longer has.
 * A context that fails to load is logged (never a byte of a key) and
 * its requests fail with tls-failed until it loads. Return 0, or the
 * first error.
 */
int tlsprof_apply(struct broker *b, const struct conf_snapshot *s);

/*
 * Check that instance ci of snapshot s may select the profile named by
 * the len bytes at name (len 0: none, always allowed). Return 0, or
 * EGRESS_ERR_INVALID_REQUEST when ci (or NULL) does not list it.
 */
int tlsprof_check(const struct conf_snapshot *s,
    const struct conf_instance *ci, const char *name, size_t len);

/*
 * Select the TLS client context for a request of instance ci under
 * snapshot s that named the profile of len bytes at name (len 0: the
 * [tls] trust). Write *ret_tls (borrowed until the next reload: hand it
 * to dial_start() at once, which takes its own reference) and
 * *ret_trust (the trust generation pooled connections are keyed with).
 * Return 0; EGRESS_ERR_INVALID_REQUEST when ci may not select it
 * (tlsprof_check()); EGRESS_ERR_TLS_FAILED when its context is not
 * loaded (it failed to load, or the profile is newer than the contexts).
 */
int tlsprof_select(struct broker *b, const struct conf_snapshot *s,
    const struct conf_instance *ci, const char *name, size_t len,
    struct dial_tls **ret_tls, uint64_t *ret_trust);

/* Answer whether trust is the generation of a context b holds now. */
int tlsprof_trust_is_current(const struct broker *b, uint64_t trust);

/* Free every profile context (broker_release()). */
void tlsprof_release(struct broker *b);

#endif /* EGRESS_BROKER_TLSPROF_H */
