/* SPDX-License-Identifier: ISC */
/*
 * dns: c-ares on libevent. The channel reports its sockets through
 * sock_state_cb; each socket gets one persistent libevent event, and one
 * timer follows ares_timeout(). A resolution is two ares_query() calls (A
 * and AAAA) plus a hard deadline of our own, so that c-ares's per-try
 * timeouts and retries can never stretch a lookup past timeout_ms.
 * Completion is always delivered from a libevent callback, never from
 * inside dns_resolve(). A cancelled or timed-out resolution stays linked
 * (without a callback) until c-ares has finished its queries.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <ares.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "broker/net/dns.h"
#include "broker/net/share.h"

#define DNS_CLASS_IN  1
#define DNS_TYPE_A    1
#define DNS_TYPE_AAAA 28

#define DNS_FAM_A     0
#define DNS_FAM_AAAA  1

struct dns_sock {
	struct dns_sock *next;
	struct dns_resolver *r;
	ares_socket_t fd;
	struct event *ev;
	short what;
};

struct dns_query {
	struct dns_query *prev, *next;
	struct dns_resolver *r;
	dns_cb cb; /* NULL once detached */
	void *arg;
	struct event *ev; /* deadline, and deferred delivery */
	int inflight;	  /* ares queries not yet finished */
	int done;	  /* both answers in, result ready */
	int status[2];	  /* ares status per family */
	size_t n[2];
	int overflow;
	char tag[DNS_TAG_MAX + 1]; /* who asked ("" for nobody) */
	int shared;		   /* holds a unit of r->share under tag */
	struct policy_addr addrs[2][POLICY_ANSWERS_MAX];
	struct policy_addr out[POLICY_ANSWERS_MAX];
};

struct dns_resolver {
	struct event_base *base;
	ares_channel channel;
	int channel_ok;
	struct event *timer;
	struct dns_sock *socks;
	struct dns_query *queries;
	size_t pending;	    /* resolutions with a callback to run */
	size_t outstanding; /* dns_query objects not yet freed */
	uint64_t nqueries;
	int timeout_ms;
	int destroying;
	struct share *share; /* tagged lookups' fair shares, or NULL */
};

static void dns_rearm(struct dns_resolver *);

static int
dns_port_parse(const char *s, uint16_t *ret_port)
{
	unsigned long v = 0;
	const char *p;

	if (*s == '\0' || *s == '0')
		return EGRESS_ERR_INVALID;
	for (p = s; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || p - s >= 5)
			return EGRESS_ERR_INVALID;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v < 1 || v > 65535)
		return EGRESS_ERR_INVALID;
	*ret_port = (uint16_t)v;
	return 0;
}

int
dns_server_parse(const char *s, struct policy_addr *ret_addr,
    uint16_t *ret_port)
{
	char buf[64];
	const char *colon, *end;
	struct policy_addr a;
	uint16_t port = 53;
	size_t len;

	if (s == NULL)
		return EGRESS_ERR_INVALID;
	len = strlen(s);
	if (len == 0 || len >= sizeof(buf))
		return EGRESS_ERR_INVALID;
	if (s[0] == '[') {
		end = strchr(s, ']');
		if (end == NULL || end == s + 1)
			return EGRESS_ERR_INVALID;
		memcpy(buf, s + 1, (size_t)(end - s - 1));
		buf[end - s - 1] = '\0';
		if (policy_addr_parse(buf, &a) != 0 || a.family != 6)
			return EGRESS_ERR_INVALID;
		if (end[1] != '\0') {
			if (end[1] != ':' ||
			    dns_port_parse(end + 2, &port) != 0)
				return EGRESS_ERR_INVALID;
		}
	} else {
		colon = strchr(s, ':');
		if (colon != NULL && strchr(colon + 1, ':') != NULL) {
			/* Bare IPv6, no port. */
			if (policy_addr_parse(s, &a) != 0 || a.family != 6)
				return EGRESS_ERR_INVALID;
		} else {
			len = colon != NULL ? (size_t)(colon - s) : len;
			memcpy(buf, s, len);
			buf[len] = '\0';
			if (policy_addr_parse(buf, &a) != 0 || a.family != 4)
				return EGRESS_ERR_INVALID;
			if (colon != NULL &&
			    dns_port_parse(colon + 1, &port) != 0)
				return EGRESS_ERR_INVALID;
		}
	}
	*ret_addr = a;
	*ret_port = port;
	return 0;
}

/* ---- libevent glue ---------------------------------------------------- */

static void
dns_sock_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_sock *s = arg;
	struct dns_resolver *r = s->r;

	/* s may be freed by sock_state_cb inside ares_process_fd. */
	ares_process_fd(r->channel,
	    (what & EV_READ) ? (ares_socket_t)fd : ARES_SOCKET_BAD,
	    (what & EV_WRITE) ? (ares_socket_t)fd : ARES_SOCKET_BAD);
	dns_rearm(r);
}

static void
dns_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_resolver *r = arg;

	ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	dns_rearm(r);
}

static void
dns_rearm(struct dns_resolver *r)
{
	struct timeval tv, *tvp;

	if (r->destroying || r->timer == NULL)
		return;
	tvp = ares_timeout(r->channel, NULL, &tv);
	if (tvp == NULL) {
		(void)event_del(r->timer);
		return;
	}
	(void)evtimer_add(r->timer, tvp);
}

static void
dns_sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
	struct dns_resolver *r = data;
	struct dns_sock **sp, *s;
	short what;

	for (sp = &r->socks; *sp != NULL; sp = &(*sp)->next)
		// cppcheck-suppress nullPointerRedundantCheck ; sp is never NULL
		if ((*sp)->fd == fd)
			break;
	s = *sp;
	what = (short)((readable ? EV_READ : 0) | (writable ? EV_WRITE : 0));
	if (what == 0) {
		if (s != NULL) {
			*sp = s->next;
			event_free(s->ev);
			free(s);
		}
		return;
	}
	if (s == NULL) {
		if ((s = calloc(1, sizeof(*s))) == NULL)
			return; /* c-ares will time the query out */
		s->r = r;
		s->fd = fd;
		s->next = r->socks;
		r->socks = s;
	} else if (s->what == what)
		return;
	if (s->ev != NULL)
		event_free(s->ev);
	s->what = what;
	s->ev = event_new(r->base, fd, (short)(what | EV_PERSIST), dns_sock_cb,
	    s);
	if (s->ev != NULL)
		(void)event_add(s->ev, NULL);
}

static int
dns_socket_cb(ares_socket_t fd, int type, void *data)
{
	int fl;

	if ((fl = fcntl(fd, F_GETFD)) == -1 ||
	    fcntl(fd, F_SETFD, fl | FD_CLOEXEC) == -1)
		return -1; /* c-ares closes the socket */
	return 0;
}

/* ---- queries ---------------------------------------------------------- */

static void
dns_query_unlink_free(struct dns_query *q)
{
	struct dns_resolver *r = q->r;

	if (q->prev != NULL)
		q->prev->next = q->next;
	else
		r->queries = q->next;
	if (q->next != NULL)
		q->next->prev = q->prev;
	if (q->ev != NULL)
		event_free(q->ev);
	if (q->shared)
		share_release(r->share, q->tag, 1);
	r->outstanding--;
	free(q);
}

/* Drop the user's interest: no callback will run. */
static void
dns_query_detach(struct dns_query *q)
{
	if (q->cb != NULL) {
		q->cb = NULL;
		q->r->pending--;
	}
	if (q->ev != NULL)
		(void)event_del(q->ev);
}

static int
dns_ares_is_empty(int st)
{
	return st == ARES_SUCCESS || st == ARES_ENOTFOUND ||
	    st == ARES_ENODATA;
}

static enum dns_status
dns_map_failure(int st)
{
	switch (st) {
	case ARES_ESERVFAIL:
		return DNS_SERVFAIL;
	case ARES_EREFUSED:
		return DNS_REFUSED;
	case ARES_ETIMEOUT:
		return DNS_TIMEOUT;
	case ARES_ECONNREFUSED:
	case ARES_EBADRESP:
	case ARES_EFORMERR:
	case ARES_ENOTIMP:
	case ARES_EBADNAME:
	case ARES_EBADQUERY:
		return DNS_BADRESP;
	default:
		return DNS_ERROR;
	}
}

/*
 * Combine the two answers. Any hard failure of either family fails the
 * whole resolution: the verdict must see the complete answer set (a
 * hidden private AAAA would otherwise escape mixed-zones).
 */
static enum dns_status
dns_query_result(struct dns_query *q, size_t *ret_n)
{
	size_t i, n = 0;
	int f;

	*ret_n = 0;
	for (f = 0; f < 2; f++)
		if (!dns_ares_is_empty(q->status[f]))
			return dns_map_failure(q->status[f]);
	if (q->overflow || q->n[0] + q->n[1] > POLICY_ANSWERS_MAX)
		return DNS_TOO_MANY;
	for (f = 0; f < 2; f++)
		for (i = 0; i < q->n[f]; i++)
			q->out[n++] = q->addrs[f][i];
	if (n > 0) {
		*ret_n = n;
		return DNS_OK;
	}
	if (q->status[0] == ARES_ENOTFOUND || q->status[1] == ARES_ENOTFOUND)
		return DNS_NXDOMAIN;
	return DNS_NODATA;
}

static void
dns_query_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_query *q = arg;
	struct dns_resolver *r = q->r;
	enum dns_status st;
	dns_cb cb = q->cb;
	void *cbarg = q->arg;
	size_t n = 0;

	if (cb == NULL)
		return;
	if (q->done)
		st = dns_query_result(q, &n);
	else
		st = DNS_TIMEOUT;
	q->cb = NULL;
	r->pending--;
	cb(cbarg, st, st == DNS_OK ? q->out : NULL, n);
	/* The callback may not free the resolver, so q is still ours. */
	if (q->inflight == 0)
		dns_query_unlink_free(q);
}

static void
dns_parse(struct dns_query *q, int fam, unsigned char *abuf, int alen)
{
	struct ares_addrttl a4[POLICY_ANSWERS_MAX + 1];
	struct ares_addr6ttl a6[POLICY_ANSWERS_MAX + 1];
	int i, n = POLICY_ANSWERS_MAX + 1, st;

	if (fam == DNS_FAM_A)
		st = ares_parse_a_reply(abuf, alen, NULL, a4, &n);
	else
		st = ares_parse_aaaa_reply(abuf, alen, NULL, a6, &n);
	q->status[fam] = st;
	if (st != ARES_SUCCESS)
		return;
	if (n > POLICY_ANSWERS_MAX) {
		q->overflow = 1;
		return;
	}
	for (i = 0; i < n; i++) {
		struct policy_addr *pa = &q->addrs[fam][i];

		memset(pa, 0, sizeof(*pa));
		if (fam == DNS_FAM_A) {
			pa->family = 4;
			memcpy(pa->bytes, &a4[i].ipaddr, 4);
		} else {
			pa->family = 6;
			memcpy(pa->bytes, &a6[i].ip6addr, 16);
		}
	}
	q->n[fam] = (size_t)n;
}

static void
dns_ares_cb(void *arg, int status, int timeouts, unsigned char *abuf, int alen,
    int fam)
{
	struct dns_query *q = arg;

	q->inflight--;
	if (q->r->destroying)
		return; /* dns_resolver_free() frees q */
	if (q->cb != NULL) {
		if (status == ARES_SUCCESS)
			dns_parse(q, fam, abuf, alen);
		else
			q->status[fam] = status;
	}
	if (q->inflight > 0)
		return;
	if (q->cb == NULL) {
		dns_query_unlink_free(q);
		return;
	}
	q->done = 1;
	event_active(q->ev, EV_TIMEOUT, 0);
}

static void
dns_ares_cb_a(void *arg, int status, int timeouts, unsigned char *abuf,
    int alen)
{
	dns_ares_cb(arg, status, timeouts, abuf, alen, DNS_FAM_A);
}

static void
dns_ares_cb_aaaa(void *arg, int status, int timeouts, unsigned char *abuf,
    int alen)
{
	dns_ares_cb(arg, status, timeouts, abuf, alen, DNS_FAM_AAAA);
}

int
dns_resolve(struct dns_resolver *r, const char *name, dns_cb cb, void *arg,
    struct dns_query **ret_query)
{
	return dns_resolve_tagged(r, NULL, name, cb, arg, ret_query);
}

int
dns_resolve_tagged(struct dns_resolver *r, const char *tag, const char *name,
    dns_cb cb, void *arg, struct dns_query **ret_query)
{
	struct dns_query *q;
	struct timeval tv;
	size_t len, tlen = 0;

	if (r == NULL || name == NULL || cb == NULL)
		return EGRESS_ERR_INVALID;
	if (tag != NULL &&
	    (tlen = strnlen(tag, DNS_TAG_MAX + 1)) > DNS_TAG_MAX)
		return EGRESS_ERR_INVALID;
	len = strnlen(name, POLICY_NAME_MAX + 2);
	if (len > 0 && name[len - 1] == '.')
		len--;
	if (len == 0 || len > POLICY_NAME_MAX || name[0] == '.')
		return EGRESS_ERR_INVALID;
	/*
	 * Count every lookup c-ares still works on, cancelled or timed out
	 * or not: a cancel does not stop the packets, so it must not free
	 * a slot before c-ares has finished both queries.
	 */
	if (r->outstanding >= DNS_PENDING_MAX)
		return EGRESS_ERR_AGAIN;
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return EGRESS_ERR_NOMEM;
	q->r = r;
	memcpy(q->tag, tag != NULL ? tag : "", tlen);
	q->tag[tlen] = '\0';
	q->ev = evtimer_new(r->base, dns_query_ev_cb, q);
	tv.tv_sec = r->timeout_ms / 1000;
	tv.tv_usec = (r->timeout_ms % 1000) * 1000;
	if (q->ev == NULL || evtimer_add(q->ev, &tv) != 0) {
		if (q->ev != NULL)
			event_free(q->ev);
		free(q);
		return EGRESS_ERR_NOMEM;
	}
	/* A tagged lookup takes its unit of the fair share until c-ares
	 * has finished it, cancelled or not. */
	if (r->share != NULL && tlen > 0) {
		int err = share_acquire(r->share, q->tag, NULL, 1);

		if (err != 0) {
			event_free(q->ev);
			free(q);
			return err;
		}
		q->shared = 1;
	}
	q->cb = cb;
	q->arg = arg;
	q->next = r->queries;
	if (r->queries != NULL)
		r->queries->prev = q;
	r->queries = q;
	r->pending++;
	r->outstanding++;
	/* Callbacks can run inside ares_query(); delivery stays deferred. */
	q->inflight = 2;
	r->nqueries += 2;
	ares_query(r->channel, name, DNS_CLASS_IN, DNS_TYPE_A, dns_ares_cb_a,
	    q);
	ares_query(r->channel, name, DNS_CLASS_IN, DNS_TYPE_AAAA,
	    dns_ares_cb_aaaa, q);
	dns_rearm(r);
	if (ret_query != NULL)
		*ret_query = q;
	return 0;
}

void
dns_query_cancel(struct dns_query *q)
{
	if (q == NULL)
		return;
	dns_query_detach(q);
	if (q->inflight == 0)
		dns_query_unlink_free(q);
}

uint64_t
dns_resolver_queries(const struct dns_resolver *r)
{
	return r != NULL ? r->nqueries : 0;
}

size_t
dns_resolver_pending(const struct dns_resolver *r)
{
	return r != NULL ? r->pending : 0;
}

size_t
dns_resolver_outstanding(const struct dns_resolver *r)
{
	return r != NULL ? r->outstanding : 0;
}

size_t
dns_resolver_outstanding_tag(const struct dns_resolver *r, const char *tag)
{
	const struct dns_query *q;
	size_t n = 0;

	if (r == NULL || tag == NULL || *tag == '\0')
		return 0;
	/* At most DNS_PENDING_MAX entries: a scan is cheap enough. */
	for (q = r->queries; q != NULL; q = q->next)
		if (strcmp(q->tag, tag) == 0)
			n++;
	return n;
}

/* ---- resolver --------------------------------------------------------- */

static int
dns_library_init(void)
{
	static int done;

	if (done)
		return 0;
	if (ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS)
		return EGRESS_ERR_UNAVAILABLE;
	done = 1;
	return 0;
}

int
dns_resolver_new(struct event_base *base, const char *const *servers,
    size_t nservers, int timeout_ms, struct dns_resolver **ret)
{
	struct ares_addr_port_node nodes[DNS_SERVERS_MAX];
	struct ares_options opts;
	struct dns_resolver *r = NULL;
	char lookups[] = "b";
	int optmask, rc;
	size_t i;

	if (base == NULL || ret == NULL || timeout_ms < 0 ||
	    (servers == NULL && nservers > 0) || nservers > DNS_SERVERS_MAX)
		return EGRESS_ERR_INVALID;
	memset(nodes, 0, sizeof(nodes));
	for (i = 0; i < nservers; i++) {
		struct policy_addr a;
		uint16_t port;

		if (dns_server_parse(servers[i], &a, &port) != 0)
			return EGRESS_ERR_INVALID;
		nodes[i].next = i + 1 < nservers ? &nodes[i + 1] : NULL;
		nodes[i].family = a.family == 4 ? AF_INET : AF_INET6;
		if (a.family == 4)
			memcpy(&nodes[i].addr.addr4, a.bytes, 4);
		else
			memcpy(&nodes[i].addr.addr6, a.bytes, 16);
		nodes[i].udp_port = port;
		nodes[i].tcp_port = port;
	}
	if ((rc = dns_library_init()) != 0)
		return rc;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return EGRESS_ERR_NOMEM;
	r->base = base;
	r->timeout_ms = timeout_ms > 0 ? timeout_ms : DNS_TIMEOUT_DEFAULT_MS;
	if ((r->timer = evtimer_new(base, dns_timer_cb, r)) == NULL) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}

	memset(&opts, 0, sizeof(opts));
	/*
	 * NOSEARCH and ndots 1: names are absolute. NOALIASES: no
	 * HOSTALIASES file. lookups "b": DNS only, never /etc/hosts.
	 * NOCHECKRESP: a SERVFAIL or REFUSED answer is final and reported
	 * as such (c-ares 1.18 would otherwise retry and report a generic
	 * ECONNREFUSED); only silence moves on to the next server. Two
	 * tries per server, each half the budget; our own deadline is
	 * authoritative.
	 */
	opts.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES |
	    ARES_FLAG_EDNS | ARES_FLAG_NOCHECKRESP;
	opts.ndots = 1;
	opts.tries = 2;
	opts.timeout = r->timeout_ms / 2 > 100 ? r->timeout_ms / 2 : 100;
	opts.lookups = lookups;
	opts.sock_state_cb = dns_sock_state_cb;
	opts.sock_state_cb_data = r;
	optmask = ARES_OPT_FLAGS | ARES_OPT_NDOTS | ARES_OPT_TRIES |
	    ARES_OPT_TIMEOUTMS | ARES_OPT_LOOKUPS | ARES_OPT_SOCK_STATE_CB;
	if (ares_init_options(&r->channel, &opts, optmask) != ARES_SUCCESS) {
		rc = EGRESS_ERR_UNAVAILABLE;
		goto out;
	}
	r->channel_ok = 1;
	ares_set_socket_callback(r->channel, dns_socket_cb, r);
	if (nservers > 0 &&
	    ares_set_servers_ports(r->channel, nodes) != ARES_SUCCESS) {
		rc = EGRESS_ERR_UNAVAILABLE;
		goto out;
	}
	*ret = r;
	r = NULL;
	rc = 0;
out:
	dns_resolver_free(r);
	return rc;
}

void
dns_resolver_set_share(struct dns_resolver *r, struct share *sh)
{
	r->share = sh;
}

void
dns_resolver_free(struct dns_resolver *r)
{
	struct dns_sock *s;

	if (r == NULL)
		return;
	r->destroying = 1;
	if (r->channel_ok)
		ares_destroy(r->channel); /* runs every ares callback */
	while (r->queries != NULL)
		// NOLINTNEXTLINE(clang-analyzer-unix.Malloc): it unlinks the head
		dns_query_unlink_free(r->queries);
	while ((s = r->socks) != NULL) {
		r->socks = s->next;
		if (s->ev != NULL)
			event_free(s->ev);
		free(s);
	}
	if (r->timer != NULL)
		event_free(r->timer);
	free(r);
}

const char *
dns_status_str(enum dns_status status)
{
	switch (status) {
	case DNS_OK:
		return "ok";
	case DNS_NXDOMAIN:
		return "nxdomain";
	case DNS_NODATA:
		return "nodata";
	case DNS_SERVFAIL:
		return "servfail";
	case DNS_REFUSED:
		return "refused";
	case DNS_TIMEOUT:
		return "timeout";
	case DNS_BADRESP:
		return "bad-response";
	case DNS_TOO_MANY:
		return "too-many-answers";
	case DNS_ERROR:
		return "error";
	}
	return "unknown";
}

int
dns_status_error(enum dns_status status)
{
	switch (status) {
	case DNS_OK:
		return 0;
	case DNS_NXDOMAIN:
	case DNS_NODATA:
		return EGRESS_ERR_NOT_FOUND;
	default:
		return EGRESS_ERR_DNS_FAILED;
	}
}

/* ---- blocking wrapper ------------------------------------------------- */

struct dns_sync {
	struct event_base *base;
	int finished;
	enum dns_status status;
	struct policy_addr *addrs;
	size_t max;
	size_t n;
	int too_big;
};

static void
dns_sync_cb(void *arg, enum dns_status status, const struct policy_addr *addrs,
    size_t n)
{
	struct dns_sync *s = arg;
	size_t i;

	s->finished = 1;
	s->status = status;
	if (n > s->max) {
		s->too_big = 1;
		n = s->max;
	}
	for (i = 0; i < n; i++)
		s->addrs[i] = addrs[i];
	s->n = n;
	(void)event_base_loopbreak(s->base);
}

int
dns_resolve_sync(const char *const *servers, size_t nservers, int timeout_ms,
    const char *name, struct policy_addr *addrs, size_t max, size_t *ret_n,
    enum dns_status *ret_status)
{
	struct dns_resolver *r = NULL;
	struct dns_sync s;
	int rc;

	if (name == NULL || ret_n == NULL || ret_status == NULL ||
	    (addrs == NULL && max > 0))
		return EGRESS_ERR_INVALID;
	memset(&s, 0, sizeof(s));
	s.addrs = addrs;
	s.max = max;
	if ((s.base = event_base_new()) == NULL)
		return EGRESS_ERR_NOMEM;
	if ((rc = dns_resolver_new(s.base, servers, nservers, timeout_ms,
		 &r)) != 0)
		goto out;
	if ((rc = dns_resolve(r, name, dns_sync_cb, &s, NULL)) != 0)
		goto out;
	while (!s.finished)
		if (event_base_loop(s.base, EVLOOP_ONCE) == -1) {
			rc = EGRESS_ERR_IO;
			goto out;
		}
	*ret_n = s.n;
	*ret_status = s.status;
	rc = s.too_big ? EGRESS_ERR_TOO_BIG : 0;
out:
	dns_resolver_free(r);
	event_base_free(s.base);
	return rc;
}
