/* SPDX-License-Identifier: ISC */
/*
 * broker: the daemon-wide state of egressd (struct broker), one per
 * process, owned by egressd.c. It holds the configuration in force, the
 * resolver and TLS client context that follow it (kept alive while
 * requests or lookups in flight use them), the per-instance connection
 * leases, the keep-alive pool, this host's addresses, the metrics and the
 * open sessions. Sessions and requests borrow it; nothing here serves a
 * connection.
 */
#ifndef EGRESS_BROKER_BROKER_H
#define EGRESS_BROKER_BROKER_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "broker/confstate.h"
#include "broker/net/nat64disc.h"
#include "policy/policy.h"

struct event;
struct event_base;
struct listen_ctx;
struct alisten;
struct dial_tls;
struct session;
struct proxy_conn;
struct proxy_port;
struct lease_table;
struct pipemove;
struct pool;
struct dns_resolver;
struct netaddr;
struct decide_policy;
struct metrics;
struct control_server;
struct share;
struct request;
struct broker_tlsprof;
struct mint;

/*
 * The fair shares of the pools instances contend for (share.h): each
 * configured instance is guaranteed BROKER_*_GUARANTEE of a pool, the
 * rest is borrowed fairly across plugins, never past the per-instance
 * maximum.
 */
#define BROKER_DNS_SHARE \
	(1024 - 64) /* tagged lookups (of
						   DNS_PENDING_MAX; the rest
						   for the broker's own) */
#define BROKER_DNS_GUARANTEE	 16
#define BROKER_DNS_PER_INSTANCE	 128
#define BROKER_SESSION_GUARANTEE 16
#define BROKER_TLS_SHARE	 256 /* TLS handshakes in progress */
#define BROKER_TLS_GUARANTEE	 4
#define BROKER_TLS_PER_INSTANCE	 64
/* Upstream connections (every lease: dialing, active or idle in the
 * pool), all instances together: half the descriptors RLIMIT_NOFILE
 * allows, less BROKER_FD_RESERVE for the broker's own (listeners,
 * resolver, control, log), at least BROKER_UP_MIN; the rest is for the
 * plugins' sessions. Each configured instance is guaranteed 4. */
#define BROKER_UP_GUARANTEE	 4
#define BROKER_UP_MIN		 64
#define BROKER_FD_RESERVE	 64
/* Buffered bytes ([broker] memory_max, counted in KiB units): each
 * configured instance is guaranteed 4 MiB and may hold at most a quarter
 * of the whole; holders take credit in 64 KiB chunks. */
#define BROKER_MEM_GUARANTEE	 (4u << 20)
#define BROKER_MEM_CHUNK	 (64u << 10)
#define BROKER_MEM_DEFAULT_MAX	 (1ULL << 30) /* and at most RAM / 4 */

/*
 * One holder's credit of buffered bytes (a session's output queue, a
 * request's response buffer): what it may buffer without asking again.
 * A holder that could not get more waits: wake(arg) is called from the
 * event loop once memory was given back somewhere.
 */
struct broker_mem {
	size_t credit; /* bytes held from the share */
	struct broker_mem *wprev, *wnext;
	int waiting;
	void (*wake)(void *arg);
	void *arg;
};

/* A file's identity, to notice a file replaced or rewritten in place. */
struct broker_file_id {
	int ok; /* 0: could not stat it */
	uint64_t dev, ino, size;
	struct timespec mtime, ctime;
};

/* Fill *ret with path's identity (ok 0 when path is NULL or cannot be
 * stat'ed). */
void broker_file_id(const char *path, struct broker_file_id *ret);

/* Answer whether a and b are the same, present file, unchanged. */
int broker_file_id_eq(const struct broker_file_id *a,
    const struct broker_file_id *b);

/*
 * The broker's event loop: with epoll, changes to the watched events are
 * kept and applied once per loop turn, so that a socket whose reading
 * stops and starts again within one turn costs no epoll_ctl() at all.
 * The price: a descriptor whose event was deleted is still watched until
 * the next turn, and if it is closed before then while its file stays
 * open elsewhere (a copy another process holds, as one sent over
 * SCM_RIGHTS may be), the kernel keeps watching the file. Such
 * descriptors are closed one turn late (alisten.c); the broker makes no
 * dup() of its own. Return NULL when out of memory.
 */
struct event_base *broker_base_new(void);

/* A resolver shared by the lookups that use it (opaque). */
struct broker_dns;

struct broker {
	struct event_base *base;
	struct confstate conf;
	struct listen_ctx *listen;
	struct alisten *alisten; /* listeners attached by launchers */

	struct broker_dns *dns;		 /* current resolver */
	struct dial_tls *tls;		 /* current TLS client context */
	char *tls_ca;			 /* its ca_file (NULL: system) */
	int tls_ok;			 /* 0: TLS trust failed to load */
	uint64_t tls_gen;		 /* bumped whenever tls is rebuilt */
	struct broker_file_id tls_ca_id; /* tls_ca's identity when loaded */
	char *parent_url;    /* [upstream_proxy] url pooled connections were
			     made through (NULL: direct) */
	char *parent_auth;   /* and the credentials (NULL: none) */
	uint64_t parent_gen; /* bumped whenever either changes */
	struct broker_tlsprof *tlsprofs; /* [tls.profiles.NAME] contexts
					    (tlsprof.h) */
	size_t ntlsprofs;
	uint64_t tlsprof_seq; /* their generations */
	struct mint *inspect; /* the inspection CA's leaves and TLS server
				 (inspect.h); NULL: none loaded */

	struct lease_table *leases; /* per-instance upstream counts */
	struct pool *pool;	    /* idle keep-alive upstreams; NULL:
					   no reuse (Connection: close) */
	struct pipemove *pipes;	    /* the stream relay's pipes (opened at
					   first use; broker_pipes()) */
	int pipes_failed;	    /* ... cannot be used: copy */
	uint64_t pipes_retry_ms;    /* ... could not be opened for now:
					   not again before this
					   (broker_now_ms) */

	struct netaddr *netaddr; /* own addresses from netlink; NULL:
				    unknown (every decision refuses) */
	struct metrics *metrics; /* counters for `show metrics` */
	struct control_server *control;
	struct nat64disc *nat64q;      /* discovery in flight, or NULL */
	struct nat64disc_result nat64; /* the last discovery's outcome */
	time_t started;

	/* Bumped by every guest read and upstream event: the polling loop
	 * (spin.h, egressd.c) polls while it moves. */
	unsigned long activity;
	uint64_t poll_hits; /* work after an empty poll: wake-ups saved */
	uint64_t poll_us;   /* microseconds of polls that found nothing */

	struct share *dns_share;	/* pending lookups per instance */
	struct share *session_share;	/* sessions per instance */
	struct share *mem_share;	/* buffered KiB per instance */
	struct share *tls_share;	/* TLS handshakes in progress */
	struct share *up_share;		/* upstream connections (leases) */
	uint64_t memory_max;		/* its capacity in bytes */
	struct broker_mem *mem_waiters; /* holders waiting for credit */
	struct broker_mem *mem_waking;	/* those being woken now */
	struct event *mem_wake_ev;	/* wakes them from the loop */

	struct session *sessions;
	struct proxy_conn *proxies;	/* proxy front clients (proxy.h) */
	struct proxy_port *proxy_ports; /* their TCP ports (proxy_port.h) */
	size_t nsessions;		/* both kinds */
	unsigned proxy_head_ms;		/* 0: PROXY_HEAD_MS (proxy.h) */
	size_t nrequests;		/* streams being served */
	struct request *lingering;	/* streams finishing after their
					   connection left (request.h) */
	struct request *relays;		/* every stream relaying, and every
					   HTTP exchange running */
	uint64_t request_seq;
	char id_prefix[12];
	int draining;
	struct event *drain_timer;
};

/*
 * Make the resolver and TLS context follow snapshot s (a resolver or TLS
 * context in use by requests in flight stays alive until they finish).
 * Also create the connection pool on the first call (none: no reuse) and
 * close the idle pooled connections s no longer allows: those of removed
 * instances, those whose host s no longer grants, those over the
 * instance's new budget, and every TLS one when the trust changed. The
 * trust changes when [tls] ca_file names another path, or the same path
 * now holds another file or the file was rewritten (device, inode, size,
 * mtime or ctime differ): a CA bundle replaced in place is reloaded at
 * the next reload.
 * Return 0, or a negative error when the resolver could not be created
 * (the old one is kept) or the TLS trust failed to load (HTTPS requests
 * then fail with tls-failed until fixed); both are logged.
 */
int broker_apply_conf(struct broker *b, const struct conf_snapshot *s);

/*
 * Create the fair shares on the first call (and attach the upstream one
 * to b->leases, when it exists) and declare snapshot s's instances to
 * them (their guarantees are reserved from then on). Return 0 or
 * EGRESS_ERR_NOMEM.
 */
int broker_apply_shares(struct broker *b, const struct conf_snapshot *s);

/*
 * Answer whether used bytes fit m's credit for instance, growing the
 * credit by BROKER_MEM_CHUNK steps up to limit bytes from the broker's
 * memory share (1), or not (0: m now waits for its wake callback).
 * Without a memory share (tests), everything up to limit fits.
 */
int broker_mem_room(struct broker *b, const char *instance,
    struct broker_mem *m, size_t used, size_t limit);

/* Give back m's credit beyond used plus one chunk (all of it when used
 * is 0 and all is set), and stop m waiting when all is set. */
void broker_mem_trim(struct broker *b, const char *instance,
    struct broker_mem *m, size_t used, int all);

/*
 * The pipes that move upstream bytes to guests without a copy
 * (pipemove.h), opened at first use; NULL when they could not be (every
 * move then copies). Splicing refused by the system (pipemove_open())
 * turns them off for good; any other failure (descriptors, memory) is
 * tried again after BROKER_PIPES_RETRY_MS. Both are logged.
 */
#define BROKER_PIPES_RETRY_MS 10000
struct pipemove *broker_pipes(struct broker *b);

/* Release the pool, resolver, TLS context, leases, fair shares and
 * local-address cache (after every session is gone). */
void broker_release(struct broker *b);

/*
 * Take a reference on the current resolver (NULL when there is none), so
 * that a lookup keeps it alive across reloads. Give it back with
 * broker_dns_release() (NULL is a no-op; safe inside the resolver's own
 * callback: the resolver is freed from the loop, later) before
 * broker_release().
 */
struct broker_dns *broker_dns_hold(struct broker *b);
struct dns_resolver *broker_dns_resolver(const struct broker_dns *d);
void broker_dns_release(struct broker_dns *d);

/*
 * Fill the own-address fields of ret (local, nlocal, nets, nnets: every
 * address this host delivers locally, borrowed until the loop runs again)
 * from netlink's current set. Return 0, or EGRESS_ERR_UNAVAILABLE while
 * the set is unknown (no netlink since the start, or the last re-read
 * failed): the decision is then the deny "policy-unavailable", never a
 * classification without this host's addresses.
 */
int broker_own_addrs(struct broker *b, struct decide_policy *ret);

/*
 * Return the capacity of the upstream-connection share for a soft
 * RLIMIT_NOFILE of nofile (see BROKER_UP_GUARANTEE).
 */
size_t broker_upstream_max(uint64_t nofile);

/*
 * Write "PREFIX-SEQ" (a request id) into buf of n bytes, NUL-terminated,
 * truncated to fit as snprintf() would.
 */
void broker_format_id(char *buf, size_t n, const char *prefix, uint64_t seq);

/*
 * Start dial parameters for an upstream connection of instance (borrowed
 * by *p): zero *p, then set the fair share of TLS handshakes, the tag,
 * and, when s names an [upstream_proxy], the parent in *parent (which
 * must outlive dial_start()). The caller sets the destination.
 * Return 0, or EGRESS_ERR_AGAIN when s's parent (its url or credentials)
 * is not that of the configuration in force (the one last applied while
 * the configuration is broken): s is older than a reload that changed
 * it, and nothing may be dialed through a parent that was removed or
 * whose credentials were replaced.
 */
struct dial_params;
struct dial_parent;
int broker_dial_params(struct broker *b, const struct conf_snapshot *s,
    const char *instance, struct dial_params *p, struct dial_parent *parent);

/* Return the monotonic clock in milliseconds and in microseconds. */
uint64_t broker_now_ms(void);
uint64_t broker_now_us(void);

#endif /* EGRESS_BROKER_BROKER_H */
