/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: policy_addr_classify() on any address (any family value,
 * any bytes) with a NULL context, and with a context holding a declared
 * NAT64 list of any content (n up to POLICY_NAT64_MAX, prefix lengths of
 * any value), up to 16 local addresses and up to 16 local nets of any
 * content (any length, sorted or not). The result is asserted to be
 * exactly one class for an IPv4 address and an address of no family
 * (any context), and for every IPv6 address outside the well-known NAT64
 * prefix with no declared NAT64 list (NULL context, or any local
 * addresses and nets).
 * prove: sources policy/classify.c policy/nat64.c policy/addr.c policy/inet.c
 */
#include "__fc_builtin.h"

#include "policy/policy.h"

#define LOCAL_MAX 16

static struct policy_nat64_list list;
static struct policy_addr local[LOCAL_MAX];
static struct policy_net nets[LOCAL_MAX];

/* Exactly one class: one bit of the five. */
/*@ predicate one_class(unsigned r) =
	r == POLICY_CLASS_PUBLIC || r == POLICY_CLASS_PRIVATE ||
	r == POLICY_CLASS_RESERVED || r == POLICY_CLASS_METADATA ||
	r == POLICY_CLASS_LOOPBACK;
*/

/* The well-known NAT64 prefix, 64:ff9b::/96 (RFC 6052), always decoded. */
static const uint8_t wkp[12] = { 0x00, 0x64, 0xff, 0x9b };

/*
 * Every IPv6 address outside 64:ff9b::/96, in 24 parts: the first k
 * bytes equal the prefix's and byte k is below or above its byte (the
 * rest any value). Each is classified with ctx (NULL, or one without a
 * declared NAT64 list) and must get exactly one class.
 */
static void
outside_well_known(const struct policy_classify_ctx *ctx, int k)
{
	struct policy_addr a;
	unsigned r;
	int i;

	Frama_C_make_unknown((char *)&a, sizeof(a));
	a.family = 6;
	for (i = 0; i < k; i++)
		a.bytes[i] = wkp[i];
	if (wkp[k] > 0) {
		a.bytes[k] = Frama_C_unsigned_char_interval(0, wkp[k] - 1);
		r = policy_addr_classify(ctx, &a);
		/*@ assert one_class_ipv6_below: one_class(r); */
	}
	if (wkp[k] < 255) {
		a.bytes[k] = Frama_C_unsigned_char_interval(wkp[k] + 1, 255);
		r = policy_addr_classify(ctx, &a);
		/*@ assert one_class_ipv6_above: one_class(r); */
	}
}

int
main(void)
{
	struct policy_classify_ctx ctx;
	struct policy_addr a;
	unsigned r;
	int k;

	Frama_C_make_unknown((char *)&a, sizeof(a));
	(void)policy_addr_classify(NULL, &a);
	r = policy_addr_classify(NULL, NULL);
	/*@ assert one_class_for_null: one_class(r); */

	Frama_C_make_unknown((char *)&list, sizeof(list));
	list.n = Frama_C_size_t_interval(0, POLICY_NAT64_MAX);
	Frama_C_make_unknown((char *)local, sizeof(local));
	ctx.nat64 = &list;
	ctx.local = local;
	ctx.nlocal = Frama_C_size_t_interval(0, LOCAL_MAX);
	Frama_C_make_unknown((char *)nets, sizeof(nets));
	ctx.nets = nets;
	ctx.nnets = Frama_C_size_t_interval(0, LOCAL_MAX);
	(void)policy_addr_classify(&ctx, &a);

	/* An IPv4 address, or one of no family: one class, whatever the
	 * context. */
	a.family = 4;
	r = policy_addr_classify(&ctx, &a);
	/*@ assert one_class_for_ipv4: one_class(r); */
	a.family = Frama_C_interval(7, 2147483647);
	r = policy_addr_classify(&ctx, &a);
	/*@ assert one_class_for_no_family: one_class(r); */

	/* An IPv6 address outside every NAT64 prefix: one class, whatever
	 * this host's addresses and routes. (A NAT64 address is classified
	 * by every IPv4 address it translates to; its mask may hold
	 * several.) */
	ctx.nat64 = NULL;
	/*@ loop unroll 12; */
	for (k = 0; k < 12; k++) {
		outside_well_known(NULL, k);
		outside_well_known(&ctx, k);
	}
	return 0;
}
