/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the stall deadline of broker/session.c: once output
 * waits for the guest at its bound (SESSION_OUT_HIGH, or no more credit
 * from the instance's memory budget), a guest that takes no byte for
 * SESSION_STALL_MS is dropped, whether it floods PINGs without reading
 * the PONGs (its reading is then paused) or asked for a download and
 * sends nothing more. Each byte taken restarts the clock; memory given
 * back elsewhere, which wakes a paused session and lets it read again,
 * must not: otherwise a flooder sharing an instance (or the pool) with
 * anything that frees memory now and then would never be dropped. A
 * guest that has nothing waiting for it (held back because the rest of
 * its instance holds the credit) has no deadline at all.
 *
 * The tests pace themselves by the clock (a memory release each second,
 * a read three seconds in) and assert on what happened, never on how
 * fast: that the flooder is gone while releases still come, that a
 * guest is dropped at all, that a deadline the guest read through did
 * not drop it, and that a guest with nothing to read outlives the
 * deadline.
 */
#include "daemon_test.h"

#include "broker/net/share.h"

#define STALL_S (SESSION_STALL_MS / 1000.0) /* seconds */

static struct proto_msg pong; /* large: one for the whole test */

static void
stall_setup_budget(void)
{
	/* The smallest budget the configuration takes: 16 MiB, of which
	 * one instance may hold a quarter, 4 MiB. */
	dt_broker_extra = "memory_max = 16M\n";
	dt_setup();
}

TestSuite(stall_budget, .init = stall_setup_budget, .fini = dt_teardown);
TestSuite(stall, .init = dt_setup, .fini = dt_teardown);

/* Many PING frames back to back, written as the socket takes them. */
struct flood {
	uint8_t buf[64 * 1024];
	size_t len, off;
};

static void
flood_init(struct flood *f)
{
	struct proto_msg m;
	enum proto_fault e = PROTO_FAULT_NONE;
	int n;

	dt_msg(&m, PROTO_MSG_PING, 0, 0);
	memcpy(m.ping.opaque, "floodflo", PROTO_PING_SIZE);
	f->len = f->off = 0;
	for (;;) {
		n = proto_encode(&m, f->buf + f->len, sizeof(f->buf) - f->len,
		    &e);
		if (n <= 0)
			break;
		f->len += (size_t)n;
	}
	cr_assert_gt(f->len, 0, "no PING encodes: %s", proto_fault_str(e));
}

/* Write PINGs until the socket is full. Return 0, or -1 once the broker
 * has closed the connection. */
static int
flood_fill(struct flood *f, int fd)
{
	ssize_t k;

	for (;;) {
		k = write(fd, f->buf + f->off, f->len - f->off);
		if (k > 0) {
			f->off = (f->off + (size_t)k) % f->len;
			continue;
		}
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		cr_assert(k < 0 && (errno == EPIPE || errno == ECONNRESET),
		    "write to the broker: %s", strerror(errno));
		return -1;
	}
}

/* Read and discard whatever the broker sent. */
static void
drain_guest(int fd)
{
	uint8_t buf[65536];
	ssize_t k;

	while ((k = read(fd, buf, sizeof(buf))) > 0)
		;
	cr_assert(k < 0 && errno == EAGAIN, "read from the broker: %s",
	    k == 0 ? "closed" : strerror(errno));
}

static size_t
mem_held(void)
{
	return share_held(dt_b.mem_share, "app") * 1024;
}

/*
 * A flooder whose reading the instance's budget paused, while memory
 * held by something else of the instance is given back a chunk a
 * second: each release wakes it and it reads one more batch of PINGs,
 * but it took nothing, so it is still dropped SESSION_STALL_MS after it
 * was first paused, well before the releases run out.
 */
Test(stall_budget, memory_released_elsewhere_does_not_restart_the_clock,
    .timeout = 60)
{
	const size_t chunk = BROKER_MEM_CHUNK;
	const size_t cap = dt_b.memory_max / 4; /* one instance's most */
	const int releases_max = 2 * SESSION_STALL_MS / 1000 + 4;
	struct broker_mem other = { 0 }; /* memory held elsewhere */
	struct dt_peer *p = malloc(sizeof(*p));
	struct flood *f = malloc(sizeof(*f));
	double next;
	int i, releases = 0, taken = 0, gone = 0;
	size_t held;

	cr_assert(p != NULL && f != NULL);
	cr_assert_eq(dt_b.memory_max, 16u << 20);
	/* Hold all of the instance's budget but 256 KiB, so the flooder is
	 * paused by the budget, not by SESSION_OUT_HIGH, and stays under
	 * it however many chunks are given back to it. */
	cr_assert_eq(broker_mem_room(&dt_b, "app", &other, cap - 4 * chunk - 1,
			 cap - 4 * chunk),
	    1);
	cr_assert_eq(other.credit, cap - 4 * chunk);
	cr_assert_lt(4 * chunk + (size_t)releases_max * chunk +
		SESSION_READ_MAX + PROTO_FRAME_MAX,
	    SESSION_OUT_HIGH);

	dt_peer_hello(p, "app");
	flood_init(f);
	for (i = 0; i < DT_ITERS && mem_held() < cap; i++) {
		cr_assert_eq(flood_fill(f, p->fd), 0, "dropped while filling");
		dt_step(-1);
	}
	cr_assert_eq(mem_held(), cap,
	    "the flooder never took the budget "
	    "(%zu of %zu bytes held)",
	    mem_held(), cap);

	/* Paused now: give a chunk back each second. */
	next = dt_now() + 1.0;
	while (!gone && releases < releases_max) {
		gone = flood_fill(f, p->fd) != 0 || dt_peer_gone(p->fd);
		if (gone)
			break;
		dt_step(-1);
		if (dt_now() < next)
			continue;
		held = mem_held();
		broker_mem_trim(&dt_b, "app", &other, other.credit - 2 * chunk,
		    0);
		cr_assert_eq(mem_held(), held - chunk);
		releases++;
		next += 1.0;
		/* The wake runs from the loop: did the flooder take it? */
		for (i = 0; i < 20 && mem_held() < held; i++)
			dt_step(-1);
		if (mem_held() == held)
			taken++;
	}
	cr_assert(gone,
	    "a flooder woken by %d memory releases in %d s was "
	    "never dropped (it read nothing for all that time)",
	    releases, releases);
	cr_assert_geq(taken, 1,
	    "no release woke the flooder: the test did "
	    "not contend");
	broker_mem_trim(&dt_b, "app", &other, 0, 1);
	dt_peer_close(p);
	free(f);
	free(p);
}

/*
 * A guest that reads everything it is sent, paused because the rest of
 * its instance holds all the memory credit, has nothing waiting for it:
 * it is not dropped however long the credit stays taken, and is read
 * again once memory is given back.
 */
Test(stall_budget, guest_waiting_for_credit_is_not_dropped, .timeout = 60)
{
	const size_t cap = dt_b.memory_max / 4;
	struct broker_mem other = { 0 };
	struct dt_peer *p = malloc(sizeof(*p));
	double t0;

	cr_assert_not_null(p);
	cr_assert_eq(broker_mem_room(&dt_b, "app", &other, cap - 1, cap), 1);
	cr_assert_eq(mem_held(), cap);
	/* The HELLO answer goes straight to the socket; then no credit. */
	dt_peer_hello(p, "app");
	dt_send_ping(p, "waitcred");
	t0 = dt_now();
	while (dt_now() < t0 + STALL_S + 2.0) {
		cr_assert(!dt_peer_gone(p->fd),
		    "dropped after %.2f s while it "
		    "had nothing to read",
		    dt_now() - t0);
		dt_step(-1);
	}
	dt_peer_read(p);
	cr_assert_eq(p->len, 0, "answered without credit");
	broker_mem_trim(&dt_b, "app", &other, 0, 1);
	cr_assert_eq(dt_recv(p, &pong), 1, "not read again");
	cr_assert_eq(pong.type, PROTO_MSG_PONG);
	cr_assert_eq(memcmp(pong.ping.opaque, "waitcred", PROTO_PING_SIZE), 0);
	dt_peer_close(p);
	free(p);
}

/*
 * A guest that reads after its reading was paused is not dropped at
 * that pause's deadline: the clock starts again at the next pause, and
 * when it then takes nothing more it is dropped, no earlier than
 * SESSION_STALL_MS after it read.
 */
Test(stall, reading_disarms_the_deadline, .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct flood *f = malloc(sizeof(*f));
	double t0, t_read, t_gone;
	int i;

	cr_assert(p != NULL && f != NULL);
	dt_peer_hello(p, "app");
	flood_init(f);
	/* Paused at SESSION_OUT_HIGH (the budget is far larger). */
	for (i = 0; i < DT_ITERS && mem_held() < SESSION_OUT_HIGH; i++) {
		cr_assert_eq(flood_fill(f, p->fd), 0, "dropped while filling");
		dt_step(-1);
	}
	cr_assert_geq(mem_held(), SESSION_OUT_HIGH);
	t0 = dt_now();

	/* Read three seconds into the deadline, all there is, until the
	 * broker has taken the PINGs still queued and answered them. */
	while (dt_now() < t0 + 3.0) {
		cr_assert(!dt_peer_gone(p->fd), "dropped before its deadline");
		dt_step(-1);
	}
	t_read = dt_now();
	/* Drained, the session keeps one chunk of credit. */
	for (i = 0; i < DT_ITERS && mem_held() > BROKER_MEM_CHUNK; i++) {
		drain_guest(p->fd);
		dt_step(p->fd);
	}
	cr_assert_leq(mem_held(), BROKER_MEM_CHUNK,
	    "the output never drained");
	drain_guest(p->fd);

	/* Flood again and never read: dropped, but only once the new
	 * deadline has passed. */
	do {
		if (flood_fill(f, p->fd) != 0 || dt_peer_gone(p->fd))
			break;
		dt_step(-1);
	} while (dt_now() < t_read + 3.0 * STALL_S);
	t_gone = dt_now();
	cr_assert(dt_peer_gone(p->fd) || flood_fill(f, p->fd) != 0,
	    "a guest that stopped reading again was never dropped");
	/* Timers never fire early; the coarse clock libevent may use is
	 * a few milliseconds behind. */
	cr_assert_geq(t_gone, t_read + STALL_S - 0.1,
	    "dropped %.2f s after "
	    "it read, at the deadline it read through (%.2f s after that "
	    "pause)",
	    t_gone - t_read, t_gone - t0);
	dt_peer_close(p);
	free(f);
	free(p);
}

/* Write body bytes upstream until the socket is full. */
static void
up_fill(int fd)
{
	static uint8_t body[65536];
	ssize_t k;

	memset(body, 'x', sizeof(body));
	while ((k = write(fd, body, sizeof(body))) > 0)
		;
	cr_assert(k < 0 && (errno == EAGAIN || errno == EINTR),
	    "write upstream: %s", strerror(errno));
}

/* A download the guest asked for with its windows wide open, answered
 * by an upstream that sends without end: the guest's output reaches
 * SESSION_OUT_HIGH without the guest sending anything more. Return when
 * it has. */
static void
download_start(struct dt_peer *p, struct dt_upstream *u)
{
	struct proto_msg w;
	int i;

	dt_upstream_open(u);
	dt_peer_hello(p, "app");
	dt_msg(&w, PROTO_MSG_WINDOW_UPDATE, 0, 0);
	w.window_update.increment = 64u << 20;
	dt_send(p, &w);
	dt_request(&pong, 1, PROTO_FLAG_END_STREAM, "GET", "http",
	    u->authority, "/endless", NULL);
	dt_send(p, &pong);
	dt_msg(&w, PROTO_MSG_WINDOW_UPDATE, 0, 1);
	w.window_update.increment = 64u << 20;
	dt_send(p, &w);
	dt_upstream_wait_request(u);
	dt_upstream_reply(u,
	    "HTTP/1.1 200 OK\r\n"
	    "Content-Length: 1073741824\r\n\r\n");
	for (i = 0; i < DT_ITERS && mem_held() < SESSION_OUT_HIGH; i++) {
		up_fill(u->cfd);
		dt_step(-1);
	}
	cr_assert_geq(mem_held(), SESSION_OUT_HIGH,
	    "the download never filled the output (%zu bytes held)",
	    mem_held());
}

/* Keep the upstream sending until the broker drops the guest or until
 * the clock reaches until. Answer whether it dropped it. */
static int
download_run(struct dt_peer *p, struct dt_upstream *u, double until)
{
	while (!dt_peer_gone(p->fd) && dt_now() < until) {
		up_fill(u->cfd);
		dt_step(-1);
	}
	return dt_peer_gone(p->fd);
}

/*
 * A guest that asks for a download and then neither reads nor sends
 * anything: its reading is never paused (it sends nothing to read), but
 * its output waits at SESSION_OUT_HIGH, so the clock runs and it is
 * dropped, with what it pinned.
 */
Test(stall, download_never_read_is_dropped, .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	double t0;

	cr_assert_not_null(p);
	download_start(p, &u);
	t0 = dt_now();
	cr_assert(download_run(p, &u, t0 + 3.0 * STALL_S),
	    "a guest that never read its download "
	    "was not dropped in %.0f s",
	    dt_now() - t0);
	for (int i = 0; i < DT_ITERS && mem_held() > 0; i++)
		dt_step(-1);
	cr_assert_eq(mem_held(), 0, "memory still held after the drop");
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/*
 * The same guest reads once, three seconds in, and then never again:
 * its read restarts the clock (it is not dropped at the first deadline)
 * but does not stop it, although the output is at its bound again at
 * once and nothing else would ever look: it is dropped no earlier than
 * SESSION_STALL_MS after it read, and is dropped.
 */
Test(stall, download_read_once_is_dropped_later, .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	double t0, t_read, t_gone;

	cr_assert_not_null(p);
	download_start(p, &u);
	t0 = dt_now();
	cr_assert(!download_run(p, &u, t0 + 3.0),
	    "dropped before its deadline");
	t_read = dt_now();
	drain_guest(p->fd);
	cr_assert(download_run(p, &u, t_read + 3.0 * STALL_S),
	    "a guest that read once and stopped was "
	    "not dropped in %.0f s",
	    dt_now() - t_read);
	t_gone = dt_now();
	cr_assert_geq(t_gone, t_read + STALL_S - 0.1,
	    "dropped %.2f s after it read, at the deadline it read through "
	    "(%.2f s after the output filled)",
	    t_gone - t_read, t_gone - t0);
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}

/*
 * A guest that reads its download slowly, 2 KiB every half second: too
 * little, over SESSION_STALL_MS, for the kernel to take more from the
 * broker (a Unix socket is writable again only once most of its buffer
 * was read), but it is reading, and is not dropped.
 */
Test(stall, slow_reader_is_not_dropped, .timeout = 60)
{
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	uint8_t buf[2048];
	double t0, next;

	cr_assert_not_null(p);
	download_start(p, &u);
	t0 = next = dt_now();
	while (dt_now() < t0 + 1.5 * STALL_S) {
		cr_assert(!dt_peer_gone(p->fd),
		    "a guest reading 4 KiB/s was dropped after %.1f s",
		    dt_now() - t0);
		if (dt_now() >= next) {
			cr_assert_gt(read(p->fd, buf, sizeof(buf)), 0);
			next += 0.5;
		}
		up_fill(u.cfd);
		dt_step(-1);
	}
	cr_assert(!dt_peer_gone(p->fd));
	dt_upstream_close(&u);
	dt_peer_close(p);
	free(p);
}
