/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/evmove: whole chains and split chains move
 * without a copy (the bytes stay where they were), a short split is
 * copied, a split chain lives until both of its parts are drained (even
 * past the source buffer's end), a count beyond the source moves
 * nothing, and a model test moves random counts between three buffers,
 * splits of splits included, checking every byte against its own copy.
 * A part short for its chain is copied, so that no part held by
 * reference pins a chain more than eight times its size, a part of a
 * part measured against the first chain; more chains than one look
 * takes move in turns; no move leaves an empty chain as large as a part
 * behind, nor does a short add after a part; a shared rest drained
 * short is copied (by evmove_settle() after other drains), so that short leftovers never pile up; a callback
 * emptying dst during a move frees nothing under it; a holder takes no
 * empty chain of src; a source whose start is frozen loses and doubles
 * nothing; and when memory runs out at any
 * allocation, no byte is lost or doubled.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "broker/net/evmove.h"

static int freed;

static void
count_free(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	(void)arg;
	freed++;
}

/* The address of the first byte of b. */
static const char *
first(struct evbuffer *b)
{
	struct evbuffer_iovec v;

	cr_assert_geq(evbuffer_peek(b, 1, NULL, &v, 1), 1);
	return v.iov_base;
}

static void
pattern(char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (char)(seed + i * 7 + (i >> 9));
}

Test(evmove, whole_chains_keep_their_bytes_in_place)
{
	static char a[8192], b[8192], c[8192];
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	struct evbuffer_iovec v[2];

	cr_assert(evbuffer_add_reference(src, a, sizeof(a), NULL, NULL) == 0);
	cr_assert(evbuffer_add_reference(src, b, sizeof(b), NULL, NULL) == 0);
	cr_assert(evbuffer_add_reference(src, c, sizeof(c), NULL, NULL) == 0);
	cr_assert_eq(evmove(src, dst, sizeof(a) + sizeof(b)), 0);
	cr_assert_eq(evbuffer_peek(dst, -1, NULL, v, 2), 2);
	cr_assert_eq(v[0].iov_base, a);
	cr_assert_eq(v[1].iov_base, b);
	cr_assert_eq(evbuffer_get_length(src), sizeof(c));
	cr_assert_eq(first(src), c);
	evbuffer_free(src);
	evbuffer_free(dst);
}

Test(evmove, a_split_chain_is_shared_not_copied)
{
	static char data[100000];
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	char out[100000];
	const char *p;

	pattern(data, sizeof(data), 3);
	cr_assert(evbuffer_add(src, data, sizeof(data)) == 0);
	p = first(src);
	cr_assert_eq(evmove(src, dst, 60000), 0);
	cr_assert_eq(evbuffer_get_length(dst), 60000);
	cr_assert_eq(evbuffer_get_length(src), 40000);
	cr_assert_eq(first(dst), p, "the moved part was copied");
	cr_assert_eq(first(src), p + 60000, "the rest was copied");
	cr_assert_eq(evbuffer_remove(dst, out, 60000), 60000);
	cr_assert_eq(evbuffer_remove(src, out + 60000, 40000), 40000);
	cr_assert_arr_eq(out, data, sizeof(data));
	evbuffer_free(src);
	evbuffer_free(dst);
}

Test(evmove, whole_chains_then_a_split)
{
	static char a[8192], big[65536];
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	struct evbuffer_iovec v[2];

	cr_assert(evbuffer_add_reference(src, a, sizeof(a), NULL, NULL) == 0);
	cr_assert(evbuffer_add_reference(src, big, sizeof(big), NULL, NULL) ==
	    0);
	cr_assert_eq(evmove(src, dst, sizeof(a) + 30000), 0);
	cr_assert_eq(evbuffer_peek(dst, -1, NULL, v, 2), 2);
	cr_assert_eq(v[0].iov_base, a);
	cr_assert_eq(v[1].iov_base, big);
	cr_assert_eq(v[1].iov_len, 30000);
	cr_assert_eq(first(src), big + 30000);
	cr_assert_eq(evbuffer_get_length(src), sizeof(big) - 30000);
	evbuffer_free(src);
	evbuffer_free(dst);
}

Test(evmove, a_short_split_is_copied)
{
	static char data[65536];
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();

	cr_assert(evbuffer_add_reference(src, data, sizeof(data), NULL,
		      NULL) == 0);
	cr_assert_eq(evmove(src, dst, EVMOVE_COPY_MAX), 0);
	cr_assert_neq(first(dst), data);
	cr_assert_eq(first(src), data + EVMOVE_COPY_MAX);
	evbuffer_free(src);
	evbuffer_free(dst);
}

Test(evmove, the_split_chain_lives_until_both_parts_are_drained)
{
	static char data[65536];
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	char out[20000];

	pattern(data, sizeof(data), 11);
	freed = 0;
	cr_assert(evbuffer_add_reference(src, data, sizeof(data), count_free,
		      NULL) == 0);
	cr_assert_eq(evmove(src, dst, 20000), 0);
	evbuffer_free(src); /* the rest goes first */
	cr_assert_eq(freed, 0, "freed while dst still refers to it");
	cr_assert_eq(evbuffer_remove(dst, out, sizeof(out)), sizeof(out));
	cr_assert_arr_eq(out, data, sizeof(out));
	cr_assert_eq(freed, 1);
	evbuffer_free(dst);
	cr_assert_eq(freed, 1);
}

/* A short rest is copied back to src: only dst's part keeps the chain,
 * and draining dst frees it while src still holds its rest. */
Test(evmove, a_short_rest_is_copied_and_pins_nothing)
{
	static char data[65536];
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	char out[100];

	pattern(data, sizeof(data), 5);
	freed = 0;
	cr_assert(evbuffer_add_reference(src, data, sizeof(data), count_free,
		      NULL) == 0);
	cr_assert_eq(evmove(src, dst, sizeof(data) - 100), 0);
	cr_assert_eq(first(dst), data, "the long part was copied");
	cr_assert_neq(first(src), data + sizeof(data) - 100,
	    "a 100-byte rest keeps a 64 KiB chain");
	cr_assert_eq(evbuffer_drain(dst, sizeof(data) - 100), 0);
	cr_assert_eq(freed, 1, "the chain outlived the part that shared it");
	cr_assert_eq(evbuffer_remove(src, out, sizeof(out)), sizeof(out));
	cr_assert_arr_eq(out, data + sizeof(data) - 100, sizeof(out));
	evbuffer_free(src);
	evbuffer_free(dst);
}

/* A head just over EVMOVE_COPY_MAX from a 128 KiB chain (a guest's
 * upload read) is copied: shared, it would keep 32 times its size. */
Test(evmove, a_short_head_of_a_long_chain_is_copied)
{
	static char data[131072];
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();

	cr_assert(evbuffer_add_reference(src, data, sizeof(data), NULL,
		      NULL) == 0);
	cr_assert_eq(evmove(src, dst, EVMOVE_COPY_MAX + 1), 0);
	cr_assert_neq(first(dst), data, "4097 bytes keep a 128 KiB chain");
	cr_assert_eq(first(src), data + EVMOVE_COPY_MAX + 1);
	evbuffer_free(src);
	evbuffer_free(dst);
}

/* Every split of a 128 KiB chain: a part is shared exactly when it is
 * more than an eighth of the chain, so no shared part pins more than
 * eight times its size. */
Test(evmove, sharing_follows_the_eighth_rule)
{
	static char data[131072];
	const size_t lim = sizeof(data) / EVMOVE_SHARE_RATIO;
	size_t head;

	for (head = 1; head < sizeof(data); head += 997) {
		struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
		int head_shared, rest_shared;

		cr_assert(evbuffer_add_reference(src, data, sizeof(data), NULL,
			      NULL) == 0);
		cr_assert_eq(evmove(src, dst, head), 0);
		head_shared = first(dst) == data;
		rest_shared = first(src) == data + head;
		cr_assert_eq(head_shared, head > lim, "head %zu", head);
		cr_assert_eq(rest_shared,
		    head_shared ? sizeof(data) - head > lim : 1, "head %zu",
		    head);
		evbuffer_free(src);
		evbuffer_free(dst);
	}
}

/* 100 chains of 1000 bytes and a long one: more than one look takes;
 * the short ones move whole, the long one is split. */
Test(evmove, more_chains_than_one_look_move_in_turns)
{
	static char small[100][1000], big[65536];
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	struct evbuffer_iovec v[101];
	int i;

	for (i = 0; i < 100; i++)
		cr_assert(evbuffer_add_reference(src, small[i], 1000, NULL,
			      NULL) == 0);
	cr_assert(evbuffer_add_reference(src, big, sizeof(big), NULL, NULL) ==
	    0);
	cr_assert_eq(evmove(src, dst, 100 * 1000 + 40000), 0);
	cr_assert_eq(evbuffer_peek(dst, -1, NULL, v, 101), 101);
	for (i = 0; i < 100; i++)
		cr_assert_eq(v[i].iov_base, small[i], "chain %d was copied",
		    i);
	cr_assert_eq(v[100].iov_base, big);
	cr_assert_eq(v[100].iov_len, 40000);
	cr_assert_eq(first(src), big + 40000);
	evbuffer_free(src);
	evbuffer_free(dst);
}

/* libevent's allocations fail after a count; ours still work. */
static long oom_left = -1;

static void *
oom_malloc(size_t n)
{
	if (oom_left == 0)
		return NULL;
	if (oom_left > 0)
		oom_left--;
	return malloc(n);
}

static void *
oom_realloc(void *p, size_t n)
{
	if (oom_left == 0)
		return NULL;
	if (oom_left > 0)
		oom_left--;
	return realloc(p, n);
}

/* Check that dst, mid (unless NULL) and src, in that order, hold
 * want[0..n). */
static void
check_bytes(struct evbuffer *dst, struct evbuffer *mid, struct evbuffer *src,
    const char *want, size_t n, const char *what)
{
	struct evbuffer *b[3] = { dst, mid, src };
	char *got = malloc(n);
	size_t have = 0, len;
	int i;

	cr_assert_not_null(got);
	for (i = 0; i < 3; i++) {
		if (b[i] == NULL)
			continue;
		len = evbuffer_get_length(b[i]);
		cr_assert_leq(have + len, n, "%s: bytes doubled", what);
		cr_assert_eq(evbuffer_copyout(b[i], got + have, len),
		    (ev_ssize_t)len);
		have += len;
	}
	cr_assert_eq(have, n, "%s: %zu bytes lost", what, n - have);
	cr_assert_arr_eq(got, want, n, "%s: bytes changed", what);
	free(got);
}

/* src: a chain of 5,000 bytes read, then one of 100,000. */
static struct evbuffer *
two_chains(const char *data)
{
	struct evbuffer *src = evbuffer_new(), *t = evbuffer_new();

	cr_assert(src != NULL && t != NULL);
	cr_assert(evbuffer_add(src, data, 5000) == 0);
	cr_assert(evbuffer_add(t, data + 5000, 100000) == 0);
	cr_assert(evbuffer_add_buffer(src, t) == 0);
	evbuffer_free(t);
	return src;
}

/*
 * Each move with libevent's first k allocations succeeding and none
 * after, for every k until the move needs no more: it fails or
 * succeeds, and never loses or doubles a byte (evbuffer_remove_buffer()
 * drains what it failed to copy). The moves: a copied head; a split
 * shared both ways; a shared head with a copied rest (whole chains
 * before both); and whole chains then a cut of a part of an earlier
 * split (its 60,000 bytes from src to mid first, with memory).
 */
Test(evmove, out_of_memory_loses_no_byte)
{
	static const size_t counts[] = { 3000, 5000 + 60000, 5000 + 95000,
		5000 + 30000 };
	static char data[5000 + 100000];
	size_t c;
	long k;

	event_set_mem_functions(oom_malloc, oom_realloc, free);
	pattern(data, sizeof(data), 17);
	for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		for (k = 0;; k++) {
			struct evbuffer *src = two_chains(data);
			struct evbuffer *dst = evbuffer_new(), *mid = NULL;
			char what[64];
			int rc;

			cr_assert_not_null(dst);
			if (c == 3) {
				cr_assert_not_null(mid = evbuffer_new());
				cr_assert_eq(evmove(src, mid, 5000 + 60000),
				    0);
			}
			oom_left = k;
			rc = evmove(mid != NULL ? mid : src, dst, counts[c]);
			oom_left = -1;
			(void)snprintf(what, sizeof(what),
			    "%zu bytes, %ld allocations", counts[c], k);
			check_bytes(dst, mid, src, data, sizeof(data), what);
			if (rc == 0)
				cr_assert_eq(evbuffer_get_length(dst),
				    counts[c], "%s", what);
			evbuffer_free(src);
			evbuffer_free(dst);
			if (mid != NULL)
				evbuffer_free(mid);
			if (rc == 0)
				break;
			cr_assert_lt(k, 20, "%s: never succeeds", what);
		}
}

/* libevent's bytes allocated and not yet freed (a size before each). */
static size_t live;

static void *
count_malloc(size_t n)
{
	size_t *p = malloc(n + 16);

	if (p == NULL)
		return NULL;
	*p = n;
	live += n;
	return (char *)p + 16;
}

static void *
count_realloc(void *q, size_t n)
{
	size_t *p, *np;

	if (q == NULL)
		return count_malloc(n);
	p = (size_t *)((char *)q - 16);
	if ((np = realloc(p, n + 16)) == NULL)
		return NULL;
	live -= *np;
	*np = n;
	live += n;
	return (char *)np + 16;
}

static void
count_freemem(void *q)
{
	size_t *p;

	if (q == NULL)
		return;
	p = (size_t *)((char *)q - 16);
	live -= *p;
	free(p);
}

/*
 * A part cut again is measured against the chain it was first cut
 * from: 14,000 bytes of a 32 KiB part of a 128 KiB chain are copied (an
 * eighth of 32 KiB is 4 KiB, of 128 KiB 16 KiB), as are 14,000 bytes of
 * its 96 KiB rest; 20,000 bytes are shared, by the first chain's holder,
 * which frees the chain when the last part goes.
 */
Test(evmove, a_part_cut_again_counts_its_first_chain)
{
	static char data[131072];
	struct evbuffer *src = evbuffer_new(), *mid = evbuffer_new();
	struct evbuffer *a = evbuffer_new(), *b = evbuffer_new();

	freed = 0;
	cr_assert(evbuffer_add_reference(src, data, sizeof(data), count_free,
		      NULL) == 0);
	cr_assert_eq(evmove(src, mid, 32768), 0);
	cr_assert_eq(first(mid), data);
	cr_assert_eq(evmove(mid, a, 14000), 0);
	cr_assert_neq(first(a), data, "14,000 bytes keep a 128 KiB chain");
	cr_assert_eq(evmove(src, b, 14000), 0);
	cr_assert_neq(first(b), data + 32768,
	    "14,000 bytes of the rest keep a 128 KiB chain");
	cr_assert_eq(evmove(src, b, 20000), 0);
	cr_assert_eq(evbuffer_get_length(b), 34000);
	evbuffer_free(src);
	evbuffer_free(mid);
	evbuffer_free(a);
	cr_assert_eq(freed, 0, "freed while a part is left");
	evbuffer_free(b);
	cr_assert_eq(freed, 1);
}

/*
 * Moving a part whole, to a chain boundary, leaves no empty chain as
 * large as the part at the end of dst (evbuffer_remove_buffer() would),
 * and a frame header added after it with evmove_add() takes a short
 * chain (evbuffer_add() would take one as large as the part).
 */
Test(evmove, a_part_leaves_no_large_empty_chain_behind)
{
	static char data[65536], other[8192];
	struct evbuffer *src, *mid, *dst;
	size_t before;

	event_set_mem_functions(count_malloc, count_realloc, count_freemem);
	src = evbuffer_new();
	mid = evbuffer_new();
	dst = evbuffer_new();
	cr_assert(evbuffer_add_reference(src, data, sizeof(data), NULL,
		      NULL) == 0);
	cr_assert_eq(evmove(src, mid, 40000), 0);
	cr_assert_eq(first(mid), data);
	cr_assert(evbuffer_add_reference(mid, other, sizeof(other), NULL,
		      NULL) == 0);
	before = live;
	cr_assert_eq(evmove(mid, dst, 40000), 0);
	cr_assert_eq(first(dst), data);
	cr_assert_lt(live, before + 4096, "%zu bytes more for 40,000 moved",
	    live - before);
	before = live;
	cr_assert_eq(evmove_add(dst, "123456789", 9), 0);
	cr_assert_lt(live, before + 4096, "%zu bytes for a 9-byte header",
	    live - before);
	cr_assert_eq(evbuffer_get_length(dst), 40009);
	evbuffer_free(src);
	evbuffer_free(mid);
	evbuffer_free(dst);
}

/* A chain of n bytes read into b (reserve and commit, as a read does),
 * numbered on from *seq. */
static void
read_chain(struct evbuffer *b, size_t n, unsigned *seq)
{
	struct evbuffer_iovec v;
	size_t i;

	cr_assert_eq(evbuffer_reserve_space(b, (ev_ssize_t)n, &v, 1), 1);
	cr_assert_geq(v.iov_len, n);
	for (i = 0; i < n; i++)
		((char *)v.iov_base)[i] = (char)((*seq)++ * 131 >> 3);
	v.iov_len = n;
	cr_assert_eq(evbuffer_commit_space(b, &v, 1), 0);
}

/*
 * A shared rest that copies drain down to one byte is copied itself
 * once it is short for its chain: the byte does not keep the 64 KiB
 * read allocated, in src or moved on.
 */
Test(evmove, a_shared_rest_drained_short_is_copied)
{
	static const size_t cuts[] = { 8192, 8192, 8192, 959 };
	struct evbuffer *src, *dst, *last;
	unsigned seq = 0;
	size_t k;

	event_set_mem_functions(count_malloc, count_realloc, count_freemem);
	src = evbuffer_new();
	read_chain(src, 65536, &seq);
	dst = evbuffer_new();
	cr_assert_eq(evmove(src, dst, 40000), 0);
	evbuffer_free(dst); /* src's shared rest alone keeps the chain */
	for (k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		dst = evbuffer_new();
		cr_assert_eq(evmove(src, dst, cuts[k]), 0);
		evbuffer_free(dst);
	}
	cr_assert_eq(evbuffer_get_length(src), 1);
	cr_assert_lt(live, 8192, "one byte keeps %zu bytes", live);
	last = evbuffer_new();
	cr_assert_eq(evmove(src, last, 1), 0);
	cr_assert_lt(live, 8192, "one byte moved keeps %zu bytes", live);
	evbuffer_free(src);
	evbuffer_free(last);
}

/*
 * A guest's frames, read after read: one long frame shared, short ones
 * copied (each shrinking the shared rest), and then a frame to a
 * stream that does not read, taking the rest's last bytes and one of
 * the next read. The stream's few bytes never keep the reads.
 */
Test(evmove, short_leftovers_of_reads_do_not_pile_up)
{
	struct evbuffer *in, *fast, *paused;
	unsigned seq = 0;
	int cycle;

	event_set_mem_functions(count_malloc, count_realloc, count_freemem);
	in = evbuffer_new();
	fast = evbuffer_new();
	paused = evbuffer_new();
	read_chain(in, 65536, &seq);
	for (cycle = 0; cycle < 100; cycle++) {
		cr_assert_eq(evmove(in, fast, 40000), 0);
		while (evbuffer_get_length(in) > 4096 + 10)
			cr_assert_eq(evmove(in, fast, 4096), 0);
		cr_assert_eq(evmove(in, fast, evbuffer_get_length(in) - 10),
		    0);
		cr_assert_eq(evbuffer_drain(fast, evbuffer_get_length(fast)),
		    0);
		read_chain(in, 65536, &seq);
		cr_assert_eq(evmove(in, paused, 11), 0);
	}
	cr_assert_eq(evbuffer_get_length(paused), 1100);
	/* in's last read (128 KiB allocated) and little else */
	cr_assert_lt(live, 200000, "%zu bytes kept for %zu", live,
	    evbuffer_get_length(paused) + evbuffer_get_length(in));
	evbuffer_free(in);
	evbuffer_free(fast);
	evbuffer_free(paused);
}

/* A shared rest drained short by other means (a frame header read) is
 * copied by evmove_settle(), so that a move of all of src carries no
 * part of the read along. */
Test(evmove, a_settled_front_moves_on_as_a_copy)
{
	struct evbuffer *src, *dst, *last;
	unsigned seq = 0;

	event_set_mem_functions(count_malloc, count_realloc, count_freemem);
	src = evbuffer_new();
	read_chain(src, 65536, &seq);
	dst = evbuffer_new();
	cr_assert_eq(evmove(src, dst, 40000), 0);
	evbuffer_free(dst);
	cr_assert_eq(evbuffer_drain(src, 25536 - 9), 0);
	cr_assert_eq(evmove_settle(src), 0);
	last = evbuffer_new();
	cr_assert_eq(evmove(src, last, 9), 0);
	evbuffer_free(src);
	cr_assert_lt(live, 8192, "9 bytes moved keep %zu bytes", live);
	evbuffer_free(last);
}

/* A callback that empties dst as soon as bytes are added (not
 * deferred) does not free the holder under the move. */
static void
empty_at_once(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	(void)info;
	(void)arg;
	(void)evbuffer_drain(b, evbuffer_get_length(b));
}

Test(evmove, a_callback_emptying_dst_during_a_move)
{
	static char data[65536];
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	char out[536];

	pattern(data, sizeof(data), 29);
	cr_assert(evbuffer_add(src, data, sizeof(data)) == 0);
	cr_assert_not_null(evbuffer_add_cb(dst, empty_at_once, NULL));
	/* 65,000 shared, the 536 left copied: dst's part is the only
	 * reference to the holder when the callback drops it. */
	cr_assert_eq(evmove(src, dst, 65000), 0);
	cr_assert_eq(evbuffer_get_length(dst), 0);
	cr_assert_eq(evbuffer_remove(src, out, sizeof(out)), sizeof(out));
	cr_assert_arr_eq(out, data + 65000, sizeof(out));
	evbuffer_free(src);
	evbuffer_free(dst);
}

/*
 * A chain that ends src, cut, goes to its holder without the empty
 * chain a short two-vector read left after it (256 KiB reserved).
 */
Test(evmove, a_holder_keeps_no_empty_chain_of_src)
{
	struct evbuffer *src, *dst;
	struct evbuffer_iovec v[2];
	unsigned seq = 0;
	int nv;

	event_set_mem_functions(count_malloc, count_realloc, count_freemem);
	src = evbuffer_new();
	dst = evbuffer_new();
	read_chain(src, 60000, &seq);
	nv = evbuffer_reserve_space(src, 256 * 1024, v, 2);
	cr_assert_eq(nv, 2);
	v[0].iov_len = v[0].iov_len < 4000 ? v[0].iov_len : 4000;
	memset(v[0].iov_base, 'x', v[0].iov_len);
	cr_assert_eq(evbuffer_commit_space(src, v, 1), 0);
	cr_assert_eq(evmove(src, dst, 30000), 0);
	cr_assert_eq(evbuffer_drain(src, evbuffer_get_length(src)), 0);
	/* dst's part keeps the 64 KiB read, and nothing more */
	cr_assert_lt(live, 100000, "30,000 bytes keep %zu", live);
	evbuffer_free(src);
	evbuffer_free(dst);
}

/* A source whose start is frozen fails every way a move can go, with
 * nothing moved, lost or doubled. */
Test(evmove, a_frozen_source_moves_nothing)
{
	static const size_t counts[] = { 100, 60000, 99000 + 100 };
	static char data[100000];
	size_t c;

	pattern(data, sizeof(data), 23);
	for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();

		cr_assert(evbuffer_add_reference(src, data, 99000, NULL,
			      NULL) == 0);
		cr_assert(evbuffer_add(src, data + 99000, 1000) == 0);
		cr_assert_eq(evbuffer_freeze(src, 1), 0);
		cr_assert_eq(evmove(src, dst, counts[c]), -1, "%zu",
		    counts[c]);
		cr_assert_eq(evbuffer_get_length(dst), 0, "%zu", counts[c]);
		cr_assert_eq(evbuffer_unfreeze(src, 1), 0);
		check_bytes(dst, NULL, src, data, sizeof(data), "frozen");
		evbuffer_free(src);
		evbuffer_free(dst);
	}
}

Test(evmove, too_many_bytes_move_nothing)
{
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();

	cr_assert(evbuffer_add(src, "abc", 3) == 0);
	cr_assert_eq(evmove(src, dst, 4), -1);
	cr_assert_eq(evbuffer_get_length(src), 3);
	cr_assert_eq(evbuffer_get_length(dst), 0);
	cr_assert_eq(evmove(src, dst, 3), 0);
	cr_assert_eq(evbuffer_get_length(src), 0);
	cr_assert_eq(evbuffer_get_length(dst), 3);
	cr_assert_eq(evmove(src, dst, 0), 0);
	evbuffer_free(src);
	evbuffer_free(dst);
}

/*
 * Model: bytes are numbered in the order they were added to buffer 0;
 * moves go 0 -> 1 -> 2 (each a queue, so each buffer holds a contiguous
 * run of the numbers), with random counts, split and re-split.
 */
Test(evmove, model_random_moves_keep_every_byte)
{
	struct evbuffer *b[3];
	uint64_t lo[3] = { 0, 0, 0 }, next = 0; /* first number each holds */
	unsigned seed = 12345;
	char *chunk = malloc(200000), *out = malloc(200000);
	int step, i, k;
	size_t n, len;

	cr_assert_not_null(chunk);
	cr_assert_not_null(out);
	for (i = 0; i < 3; i++)
		cr_assert_not_null(b[i] = evbuffer_new());
	for (step = 0; step < 3000; step++) {
		seed = seed * 1103515245u + 12345u;
		k = (int)((seed >> 16) % 4);
		seed = seed * 1103515245u + 12345u;
		n = (seed >> 8) % 150000;
		if (k == 0) { /* add n numbered bytes to 0 */
			if (evbuffer_get_length(b[0]) == 0)
				lo[0] = next;
			for (len = 0; len < n; len++)
				chunk[len] = (char)((next + len) * 131 >> 3);
			cr_assert(evbuffer_add(b[0], chunk, n) == 0);
			next += n;
			continue;
		}
		i = k == 3 ? 2 : k - 1; /* 0 -> 1, 1 -> 2, 2 -> out */
		len = evbuffer_get_length(b[i]);
		if (n > len)
			n = len;
		if (i < 2) {
			if (evbuffer_get_length(b[i + 1]) == 0)
				lo[i + 1] = lo[i];
			cr_assert_eq(evmove(b[i], b[i + 1], n), 0);
			lo[i] += n;
			continue;
		}
		cr_assert_eq(evbuffer_remove(b[2], out, n), (int)n);
		for (len = 0; len < n; len++)
			cr_assert_eq(out[len],
			    (char)((lo[2] + len) * 131 >> 3), "byte %llu",
			    (unsigned long long)(lo[2] + len));
		lo[2] += n;
	}
	for (i = 0; i < 3; i++)
		evbuffer_free(b[i]);
	free(chunk);
	free(out);
}
