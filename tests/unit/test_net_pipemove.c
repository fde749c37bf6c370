/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/net/pipemove: a move puts the header and the
 * bytes read on the destination in order; a destination that is full
 * leaves header and bytes, in order, in the spill buffer; a fill of
 * nothing is EAGAIN and an ended source is 0; pipemove_take() and
 * pipemove_drop() copy or drop a fill; and after every one of them both
 * pipes are empty again, since one pair serves every connection.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <event2/buffer.h>
#include <event2/util.h>

#include "broker/net/pipemove.h"

static struct pipemove pm;
static int src[2] = { -1, -1 }, dst[2] = { -1, -1 };

static void
setup(void)
{
	cr_assert_eq(pipemove_open(&pm), 0, "%s", strerror(errno));
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, src), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, dst), 0);
	cr_assert_eq(evutil_make_socket_nonblocking(src[1]), 0);
	cr_assert_eq(evutil_make_socket_nonblocking(dst[0]), 0);
	cr_assert_eq(evutil_make_socket_nonblocking(dst[1]), 0);
}

static void
teardown(void)
{
	int i;

	pipemove_close(&pm);
	for (i = 0; i < 2; i++) {
		(void)close(src[i]);
		(void)close(dst[i]);
	}
}

TestSuite(pipemove, .init = setup, .fini = teardown);

/* Both pipes hold nothing. */
static void
pm_assert_empty(void)
{
	int n = -1;

	cr_assert_eq(ioctl(pm.fill[0], FIONREAD, &n), 0);
	cr_assert_eq(n, 0, "%d bytes left in the first pipe", n);
	cr_assert_eq(ioctl(pm.send[0], FIONREAD, &n), 0);
	cr_assert_eq(n, 0, "%d bytes left in the second pipe", n);
}

static unsigned char
pm_byte(size_t i)
{
	return (unsigned char)(i * 7 % 253);
}

/* Write n pattern bytes into the source. */
static void
pm_source(size_t n)
{
	static unsigned char buf[PIPEMOVE_MAX];
	size_t i;

	cr_assert_leq(n, sizeof(buf));
	for (i = 0; i < n; i++)
		buf[i] = pm_byte(i);
	cr_assert_eq(write(src[0], buf, n), (ssize_t)n);
}

/* Check n bytes got: "HDR", then want bytes of the pattern. */
static void
pm_expect(const unsigned char *got, size_t n, size_t want)
{
	size_t i;

	cr_assert_eq(n, 3 + want, "%zu bytes", n);
	cr_assert_eq(memcmp(got, "HDR", 3), 0);
	for (i = 0; i < want; i++)
		cr_assert_eq(got[3 + i], pm_byte(i), "byte %zu", i);
}

Test(pipemove, header_then_bytes)
{
	static unsigned char got[PIPEMOVE_MAX + 16];
	struct evbuffer *spill = evbuffer_new();
	ssize_t n;

	cr_assert_not_null(spill);
	pm_source(40000);
	cr_assert_eq(pipemove_fill(&pm, src[1], PIPEMOVE_MAX), 40000);
	cr_assert_eq(pipemove_send(&pm, "HDR", 3, 40000, dst[0], spill),
	    40003);
	cr_assert_eq(evbuffer_get_length(spill), 0);
	pm_assert_empty();
	n = read(dst[1], got, sizeof(got));
	pm_expect(got, (size_t)n, 40000);
	evbuffer_free(spill);
}

Test(pipemove, a_fill_is_bounded)
{
	struct evbuffer *spill = evbuffer_new();

	cr_assert_not_null(spill);
	pm_source(30000);
	cr_assert_eq(pipemove_fill(&pm, src[1], 1000), 1000);
	cr_assert_eq(pipemove_send(&pm, "HDR", 3, 1000, dst[0], spill), 1003);
	pm_assert_empty();
	evbuffer_free(spill);
}

Test(pipemove, nothing_to_read_and_the_end)
{
	errno = 0;
	cr_assert_eq(pipemove_fill(&pm, src[1], PIPEMOVE_MAX), -1);
	cr_assert(errno == EAGAIN || errno == EWOULDBLOCK, "%s",
	    strerror(errno));
	cr_assert_eq(shutdown(src[0], SHUT_WR), 0);
	cr_assert_eq(pipemove_fill(&pm, src[1], PIPEMOVE_MAX), 0);
	pm_assert_empty();
}

/* The destination is full: header and bytes wait in spill, in order. */
Test(pipemove, a_full_destination_spills_in_order)
{
	static unsigned char junk[4096], got[PIPEMOVE_MAX + 16];
	struct evbuffer *spill = evbuffer_new();
	size_t len;

	cr_assert_not_null(spill);
	memset(junk, 'j', sizeof(junk));
	while (write(dst[0], junk, sizeof(junk)) > 0)
		;
	cr_assert(errno == EAGAIN || errno == EWOULDBLOCK);
	pm_source(50000);
	cr_assert_eq(pipemove_fill(&pm, src[1], PIPEMOVE_MAX), 50000);
	cr_assert_eq(pipemove_send(&pm, "HDR", 3, 50000, dst[0], spill), 0);
	pm_assert_empty();
	len = evbuffer_get_length(spill);
	cr_assert_eq(evbuffer_remove(spill, got, sizeof(got)), (int)len);
	pm_expect(got, len, 50000);
	evbuffer_free(spill);
}

Test(pipemove, take_copies_and_drop_drops)
{
	static unsigned char got[PIPEMOVE_MAX];
	struct evbuffer *dst_buf = evbuffer_new();
	size_t i;

	cr_assert_not_null(dst_buf);
	pm_source(5000);
	cr_assert_eq(pipemove_fill(&pm, src[1], PIPEMOVE_MAX), 5000);
	cr_assert_eq(pipemove_take(&pm, 5000, dst_buf), 0);
	pm_assert_empty();
	cr_assert_eq(evbuffer_remove(dst_buf, got, sizeof(got)), 5000);
	for (i = 0; i < 5000; i++)
		cr_assert_eq(got[i], pm_byte(i), "byte %zu", i);
	pm_source(700);
	cr_assert_eq(pipemove_fill(&pm, src[1], PIPEMOVE_MAX), 700);
	pipemove_drop(&pm);
	pm_assert_empty();
	evbuffer_free(dst_buf);
}
