/* SPDX-License-Identifier: Apache-2.0 */
/*
 * User names of uids for what gpumd shows (the processes on each GPU in the REST status), from
 * a cache that the loop reads without ever waiting: getpwuid_r may ask NSS, that is LDAP or SSSD
 * over the network, and take seconds or hang. A uid not yet in the cache is queued for a
 * resolver thread of its own and shown as its number meanwhile; the next status shows the name.
 * A uid with no passwd entry is cached as such (shown as its number for good).
 *
 * Threads: gpumd_users_name and gpumd_users_wait may be called from any thread (a mutex guards
 * the table); the resolver thread only calls getpwuid_r. A resolver stuck in NSS at free is left
 * behind (detached): the last of it and the owner frees the cache.
 */
#ifndef GPUMD_USERS_H
#define GPUMD_USERS_H

#include <stdbool.h>
#include <stddef.h>

#define GPUMD_USER_BUFSZ 64 /* a name, NUL included (longer ones are cut) */

typedef struct gpumd_users gpumd_users_t;

/* A cache of up to cap uids (older entries make room for newer ones) with its resolver thread.
 * Returns 0 and *out (free with gpumd_users_free), or GPUM_ENOMEM / GPUM_EINTERNAL (no thread). */
int gpumd_users_new(size_t cap, gpumd_users_t **out);

/* Frees u (NULL: nothing). Does not wait for a lookup in progress. */
void gpumd_users_free(gpumd_users_t *u);

/* The name of uid into buf (GPUMD_USER_BUFSZ bytes) and true when the cache knows it; false when
 * the uid has no name or is not resolved yet (then it is queued for the resolver, once). Never
 * blocks on a lookup. */
bool gpumd_users_name(gpumd_users_t *u, unsigned uid, char *buf);

/* Waits until every uid queued so far is resolved (tests; a lookup that hangs makes it hang). */
void gpumd_users_wait(gpumd_users_t *u);

#endif /* GPUMD_USERS_H */
