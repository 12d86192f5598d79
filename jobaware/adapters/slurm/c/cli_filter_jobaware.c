/*
 * jobaware's compiled cli_filter, built by `jobaware slurm plugins --plugin-dir DIR` for the Slurm that runs here
 * (CliFilterPlugins=jobaware). It gives exactly the advice of cli_filter.lua (adapters/slurm/lua/cli_filter.lua
 * and cache.lua) from the same verdict cache, without the price of Slurm's Lua host: it reads the header and
 * trailer of the cache's header file (the cache itself is SlurmUser's), then only the submitting user's own file. Advice only: it never changes or blocks a request; when
 * anything fails there is no advice and SLURM_SUCCESS. Written against Slurm's plugin ABI with its own
 * declarations (no Slurm headers needed); the build defines:
 *   JOBAWARE_CACHE_PATH     the cache's absolute path, a string literal
 *   JOBAWARE_STALE_AFTER    seconds; the stricter of this and the file's own limit wins
 *   JOBAWARE_SLURM_VERSION  SLURM_VERSION_NUMBER of the Slurm it is for: its loader refuses any other
 * Numbers are doubles, as in Lua 5.1, so that every comparison and bucket comes out the same.
 */
#define _GNU_SOURCE  /* memmem */
#include <errno.h>  /* program_invocation_short_name */
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if !defined(JOBAWARE_CACHE_PATH) || !defined(JOBAWARE_STALE_AFTER) || !defined(JOBAWARE_SLURM_VERSION)
#error "build with -DJOBAWARE_CACHE_PATH=... -DJOBAWARE_STALE_AFTER=... -DJOBAWARE_SLURM_VERSION=..."
#endif

/* What this plugin uses of Slurm (libslurmfull, already loaded by sbatch/salloc/srun) */
typedef struct slurm_opt slurm_opt_t;  /* opaque but for its first four pointers, see command_of() */
extern char *slurm_option_get(slurm_opt_t *opt, const char *name);  /* a copy to free with slurm_xfree, or NULL */
extern void slurm_xfree(void **pointer);
extern int slurm_time_str2mins(const char *text);  /* what slurm.time_str2mins gives the Lua filter */
extern void slurm_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern void slurm_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define SLURM_SUCCESS 0
const char plugin_name[] = "jobaware advice at submission";
const char plugin_type[] = "cli_filter/jobaware";
const uint32_t plugin_version = JOBAWARE_SLURM_VERSION;
/* what this file was built for, read by `jobaware slurm doctor` in the built file */
#define STRING(x) #x
#define EXPANDED(x) STRING(x)
const char jobaware_build[] = "jobaware cli_filter; slurm " EXPANDED(JOBAWARE_SLURM_VERSION) "; stale "
	EXPANDED(JOBAWARE_STALE_AFTER) "; cache " JOBAWARE_CACHE_PATH;

#define MAX_BYTES (64L * 1024 * 1024)  /* a larger file is refused (fail open): reading stays bounded */
#define HEADER_MAX 4096  /* a longer first line is no header (the adapter's are under 200 bytes) */
/* What verdicts.py writes, in bytes (cache.lua's caps): a longer field is not its. The file's text comes from
 * user-named jobs, so every field is capped before anything reads it. */
#define DIGITS_MAX 20
#define NAME_MAX_BYTES 64  /* Verdict's user, account and partition */
#define COMMENT_BYTES (4 * 200)  /* COMMENT_MAX characters of UTF-8 */
#define ADVICE_BYTES (4 * 1000)  /* ADVICE_MAX characters of UTF-8 */
/* Slurm's limit on a request's strings (_test_job_desc_fields() in src/slurmctld/job_mgr.c): an option longer
 * than this means no advice (slurmctld refuses the job), before anything reads it */
#define SLURM_MAX 1024
/* The cache's header file, the one part of the cache every user may read (see verdicts.py) */
#define HEADER_PATH JOBAWARE_CACHE_PATH ".users/#header.tsv"
#define FIELDS 12
#define NO_VAL 4294967294.0  /* Slurm's "not set" for 32-bit fields; larger numbers are "not set" too */
#define ABSENT ((double) NAN)  /* a value or bucket the job does not state (Lua's nil) */
#define absent(x) isnan(x)

typedef struct {
	const char *p;
	size_t n;
} span_t;

static bool span_is(span_t s, const char *text)
{
	return s.n == strlen(text) && memcmp(s.p, text, s.n) == 0;
}

static bool span_eq(span_t a, span_t b)
{
	return a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

/* Splits `s` at tabs into at most `max` fields; the number of fields, or max + 1 when there are more */
static int split(span_t s, span_t *out, int max)
{
	int n = 0;
	const char *start = s.p, *end = s.p + s.n;
	for (;;) {
		const char *tab = memchr(start, '\t', end - start);
		if (n == max)
			return max + 1;
		out[n].p = start;
		out[n].n = (tab ? tab : end) - start;
		n++;
		if (!tab)
			return n;
		start = tab + 1;
	}
}

/* strtod of the first `n` characters of `p` (digits, maybe a dot): the number Lua's tonumber gives, also for a
 * long run of digits (a user's "--gres=gpu:000...02" is 2); ABSENT when memory runs out */
static double number_of(const char *p, size_t n)
{
	char digits[64], *text = n < sizeof(digits) ? digits : malloc(n + 1);
	double value;
	if (!text)
		return ABSENT;
	memcpy(text, p, n);
	text[n] = '\0';
	value = strtod(text, NULL);
	if (text != digits)
		free(text);
	return value;
}

/* cache.lua's integer(): "^%d+$" of at most DIGITS_MAX digits, else ABSENT */
static double integer(span_t s)
{
	size_t i;
	if (s.n == 0 || s.n > DIGITS_MAX)
		return ABSENT;
	for (i = 0; i < s.n; i++)
		if (s.p[i] < '0' || s.p[i] > '9')
			return ABSENT;
	return number_of(s.p, s.n);
}

/* cache.lua's jobaware_bucket(): floor(log2(value + 1)); ABSENT for absent, negative or NO_VAL-like values */
static double bucket(double value)
{
	double v, b = 0;
	if (absent(value) || value < 0 || value >= NO_VAL)
		return ABSENT;
	for (v = floor(value) + 1; v >= 2; v = floor(v / 2))
		b++;
	return b;
}

/* ---- the said file: the time of the last note about a broken cache (cli_filter.lua's JOBAWARE_SAID_WITHIN) */

/* A descriptor of the regular file at `path` opened for reading, else -1. O_NONBLOCK: a FIFO or a terminal put in
 * the file's place never blocks sbatch (Lua's io.open would wait) */
static int open_regular(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool said_within(time_t now, double seconds)
{
	char path[4096], tmp[4104], stamp[32];
	const char *dir = getenv("XDG_RUNTIME_DIR");
	double last;
	FILE *f;
	int fd, n;
	bool written;
	if (!dir)
		dir = getenv("HOME");
	if (!dir || !*dir || snprintf(path, sizeof(path), "%s/.jobaware-cli-filter-said", dir) >= (int) sizeof(path))
		return false;
	if ((fd = open_regular(path)) >= 0) {
		if ((f = fdopen(fd, "rb"))) {
			int got = fscanf(f, "%lf", &last);  /* Lua 5.1's f:read("*n") */
			fclose(f);
			if (got == 1 && now >= last && now - last < seconds)
				return true;
		} else {
			close(fd);
		}
	}
	/* a new file of our own, never one put there before (a link to another file: root may run sbatch with a
	 * user's $XDG_RUNTIME_DIR or $HOME), then renamed over the said file (rename replaces a link, not its target) */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) >= 0) {
		n = snprintf(stamp, sizeof(stamp), "%ld\n", (long) now);
		written = write(fd, stamp, n) == n;
		if (close(fd) == 0 && written)
			rename(tmp, path);
		else
			unlink(tmp);
	}
	return false;
}

/* Says at info level, at most once a minute, why there are no verdicts (cache.lua's say()) */
static void say(const char *why, time_t now)
{
	if (!said_within(now, 60))
		slurm_info("jobaware: verdict cache %s %s; no verdicts until it is fixed (failing open)",
			   JOBAWARE_CACHE_PATH, why);
}

/* ---- reading the cache (cache.lua's open() and parse()) */

typedef struct {
	double created, stale_after, max_age;
	char default_partition[HEADER_MAX];
} header_t;

/* The descriptor of `path` opened for reading after a size check, and its size; -1 and why not */
static int open_file(const char *path, off_t *size, const char **why)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		*why = "missing";
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		*why = "not a regular file";
		return -1;
	}
	if (st.st_size > MAX_BYTES) {
		close(fd);
		*why = "larger than 67108864 bytes";
		return -1;
	}
	if (st.st_size == 0) {
		close(fd);
		*why = "empty";
		return -1;
	}
	*size = st.st_size;
	return fd;
}


/* Checks a header line and the trailer that ends `text` (cache.lua's parse(): `text` is what follows the header,
 * from its newline on); fills `h` when given. NULL when good, else what is wrong (in `why` or a constant). */
static const char *check(span_t line, span_t text, header_t *h, char *why, size_t why_size)
{
	span_t f[9];
	char trailer[HEADER_MAX + 8];
	int tn;
	if (split(line, f, 8) != 8 || !span_is(f[0], "jobaware-verdicts") || !span_is(f[1], "2")
	    || absent(integer(f[2])) || absent(integer(f[3])) || absent(integer(f[4])) || absent(integer(f[6]))
	    || absent(integer(f[7])))
		return "not a version 2 jobaware verdict cache";
	tn = snprintf(trailer, sizeof(trailer), "\nend\t%.*s\n", (int) f[6].n, f[6].p);
	if (text.n < (size_t) tn || memcmp(text.p + text.n - tn, trailer, tn) != 0) {
		snprintf(why, why_size, "truncated: no trailer for %.*s verdicts", (int) f[6].n, f[6].p);
		return why;
	}
	if (h) {
		h->created = integer(f[3]);
		h->stale_after = integer(f[4]);
		h->max_age = integer(f[7]);
		memcpy(h->default_partition, f[5].p, f[5].n);
		h->default_partition[f[5].n] = '\0';
	}
	return NULL;
}

/* The header line at the start of `data` (`n` bytes; shorter than that when it ends in a newline). The callers
 * take a line of HEADER_MAX bytes or more for no header (cache.lua would read it whole: no writer makes one). */
static span_t header_line(const char *data, size_t n)
{
	const char *nl = memchr(data, '\n', n);
	return (span_t) {data, nl ? (size_t) (nl - data) : n};
}

/* cache.lua's present(): whether a file is at `path`, readable or not */
static bool present(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return fd >= 0 || errno != ENOENT;
}

/* cache.lua's jobaware_load() of the cache's header file, as cli_filter.lua calls it: true with the header when the
 * cache file is there and the header file whole and fresh; else false, and why is said at most once a minute. Only
 * the header file's header and trailer are read. */
static bool load(header_t *h, time_t now)
{
	char head[HEADER_MAX], tail[HEADER_MAX + 8], detail[HEADER_MAX + 64], why[HEADER_MAX + 128];
	const char *bad = "not a version 2 jobaware verdict cache";
	off_t size;
	ssize_t got, t;
	int fd = -1;
	if (!present(JOBAWARE_CACHE_PATH))
		bad = "missing";
	else if ((fd = open_file(HEADER_PATH, &size, &bad)) < 0 && strcmp(bad, "missing") == 0)
		bad = "has no header file " HEADER_PATH;
	if (fd < 0) {
		say(bad, now);
		return false;
	}
	got = pread(fd, head, sizeof(head), 0);
	t = pread(fd, tail, sizeof(tail), size > (off_t) sizeof(tail) ? size - (off_t) sizeof(tail) : 0);
	close(fd);
	if (got > 0 && t > 0) {
		span_t line = header_line(head, got);
		if (line.n < HEADER_MAX)
			bad = check(line, (span_t) {tail, t}, h, detail, sizeof(detail));
	}
	if (bad) {
		snprintf(why, sizeof(why), "corrupt (%s)", bad);
	} else {
		double limit = fmin(h->stale_after, JOBAWARE_STALE_AFTER);
		if (now - h->created <= limit)
			return true;
		snprintf(why, sizeof(why), "stale (written %.14g s ago, limit %.14g s)", now - h->created, limit);
	}
	say(why, now);
	return false;
}

/* ---- the user's own file and the nearest-shape lookup (cache.lua's user_index() and jobaware_lookup()) */

typedef struct {
	span_t account, partition, advice;
	double shape[5], n_similar, created;
} record_t;

/* One record, or false when any field is not what verdicts.py writes (cache.lua's parse_record()) */
static bool parse_record(span_t line, record_t *r)
{
	span_t f[FIELDS + 1];
	int i;
	if (split(line, f, FIELDS) != FIELDS)
		return false;
	for (i = 0; i < 5; i++)
		if (absent(r->shape[i] = integer(f[3 + i])))
			return false;
	r->n_similar = integer(f[8]);
	r->created = integer(f[9]);
	if (absent(r->n_similar) || absent(r->created) || f[0].n == 0 || f[2].n == 0 || f[10].n == 0)
		return false;
	if (f[0].n > NAME_MAX_BYTES || f[1].n > NAME_MAX_BYTES || f[2].n > NAME_MAX_BYTES || f[10].n > COMMENT_BYTES
	    || f[11].n > ADVICE_BYTES)
		return false;
	r->account = f[1];
	r->partition = f[2];
	r->advice = f[11];
	return true;
}

typedef struct {
	bool found;
	record_t best;
	double distance;
} nearest_t;

/* cache.lua's nearest(), one record at a time: the least distance over the dimensions the job states; ties go to
 * more similar jobs, then to the first in the file */
static void consider(nearest_t *n, const record_t *r, const double *query)
{
	double d = 0;
	int i;
	for (i = 0; i < 5; i++)
		if (!absent(query[i]))
			d += fabs(query[i] - r->shape[i]);
	if (!n->found || d < n->distance || (d == n->distance && r->n_similar > n->best.n_similar)) {
		n->found = true;
		n->best = *r;
		n->distance = d;
	}
}

/* "^[%w._@+-]+$" or "^#%d+$", of at most NAME_MAX_BYTES: a name the adapter may have written a file for */
static bool user_name_ok(const char *user)
{
	const char *c;
	if (strnlen(user, NAME_MAX_BYTES + 1) > NAME_MAX_BYTES)
		return false;
	if (user[0] == '#' && user[1] && strspn(user + 1, "0123456789") == strlen(user + 1))
		return true;
	for (c = user; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
		      || strchr("._@+-", *c)))
			return false;
	return c != user;
}

/* The advice of the user's verdict for (account, partition, shape buckets `query`), a span of `*body`, which the
 * caller frees (the verdict's advice may be empty). False when there is no current verdict or the user's file
 * cannot be read (then said at most once a minute). One pass over the user's records finds what cache.lua's index
 * finds: the first record of the exact key, the nearest of the same account and partition, the nearest of the
 * partition. */
static bool lookup(const header_t *h, const char *user, span_t account, span_t partition, const double *query,
		   time_t now, char **body, span_t *advice)
{
	char path[4096], detail[HEADER_MAX + 64], why[HEADER_MAX + 256];
	const char *bad = NULL, *p, *end;
	off_t size, done = 0;
	ssize_t got = 1;
	bool complete = true, have_exact = false;
	record_t r, exact = {0};
	nearest_t group = {false}, wider = {false};
	int i, fd, skipped = 0;

	if (!user_name_ok(user))
		return false;  /* no verdicts for a name the adapter cannot have written */
	/* a path too long to open is missing, as for Lua's io.open */
	if (snprintf(path, sizeof(path), "%s.users/%s.tsv", JOBAWARE_CACHE_PATH, user) >= (int) sizeof(path))
		bad = "missing";
	if ((fd = bad ? -1 : open_file(path, &size, &bad)) < 0) {
		if (strcmp(bad, "missing") == 0) {
			int dir = open(JOBAWARE_CACHE_PATH ".users/.", O_RDONLY | O_CLOEXEC);
			if (dir >= 0) {
				close(dir);
				return false;  /* no verdicts for this user */
			}
			snprintf(why, sizeof(why), "has no folder of user files %s.users/", JOBAWARE_CACHE_PATH);
		} else {
			snprintf(why, sizeof(why), "user file %s.tsv %s", user, bad);
		}
		say(why, now);
		return false;
	}
	if ((*body = malloc(size)))  /* the user's own file: a few kB */
		while (done < size && (got = read(fd, *body + done, size - done)) > 0)
			done += got;
	close(fd);
	if (!*body || got <= 0)
		return false;
	{
		span_t line = header_line(*body, done);
		/* cache.lua reads "\n" .. what follows the header: here, from the header's own newline on */
		span_t text = line.n < (size_t) done ? (span_t) {*body + line.n, done - line.n} : (span_t) {"\n", 1};
		bad = line.n >= HEADER_MAX ? "not a version 2 jobaware verdict cache"
			: check(line, text, NULL, detail, sizeof(detail));
		if (bad) {
			snprintf(why, sizeof(why), "user file %s.tsv corrupt (%s)", user, bad);
			say(why, now);
			return false;
		}
		p = text.p + 1;
		end = text.p + text.n - 1;  /* the lines up to the trailer's "end\tCOUNT" line */
		while (end > p && end[-1] != '\n')
			end--;
	}
	for (i = 0; i < 5; i++)
		complete = complete && !absent(query[i]);
	for (; p < end; p = (const char *) memchr(p, '\n', end - p) + 1) {
		span_t rec = {p, (size_t) ((const char *) memchr(p, '\n', end - p) - p)};
		bool current, same = true;
		if (rec.n == 0)
			continue;  /* Lua's gmatch("[^\n]+") skips empty lines */
		if (!parse_record(rec, &r)) {
			skipped++;
			continue;
		}
		if (!span_eq(r.partition, partition))
			continue;
		current = now - r.created <= h->max_age;
		if (span_eq(r.account, account)) {
			for (i = 0; i < 5; i++)
				same = same && r.shape[i] == query[i];
			if (complete && same && !have_exact) {
				exact = r;  /* the first record of a key is the one indexed, current or not */
				have_exact = true;
			}
			if (current)
				consider(&group, &r, query);
		}
		if (current)
			consider(&wider, &r, query);
	}
	if (skipped)
		slurm_debug("jobaware: %s: skipped %d malformed verdict lines of user %s", JOBAWARE_CACHE_PATH,
			    skipped, user);
	if (have_exact && now - exact.created <= h->max_age)
		*advice = exact.advice;
	else if (group.found)
		*advice = group.best.advice;
	else if (wider.found)
		*advice = wider.best.advice;
	else
		return false;
	return true;
}

/* ---- the advice (cli_filter.lua's shape_of() and cache.lua's jobaware_fill()) */

enum { TIME_MINUTES, NODES, CPUS, MEM_MIB, GPUS };
static const char *const ASKED[5] = {"time_minutes", "nodes", "cpus", "mem_mib", "gpus"};

/* A growing string; `failed` once memory ran out (then no advice) */
typedef struct {
	char *p;
	size_t n, cap;
	bool failed;
} text_t;

static void put(text_t *t, const char *p, size_t n)
{
	if (t->failed)
		return;
	if (t->n + n + 1 > t->cap) {
		size_t cap = 2 * (t->n + n + 1);
		char *more = realloc(t->p, cap);
		if (!more) {
			t->failed = true;
			return;
		}
		t->p = more;
		t->cap = cap;
	}
	memcpy(t->p + t->n, p, n);
	t->n += n;
	t->p[t->n] = '\0';
}

/* The length of "{name}" at `p` (Lua's "{([%w_]+)}"), 0 when there is none; the name in `name` */
static size_t name_at(const char *p, const char *end, span_t *name)
{
	const char *q = p + 1;
	if (*p != '{')
		return 0;
	while (q < end && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')
			   || *q == '_'))
		q++;
	if (q == p + 1 || q == end || *q != '}')
		return 0;
	*name = (span_t) {p + 1, (size_t) (q - p - 1)};
	return q - p + 1;
}

/* The value the job asks for under `name` as string.format("%d", math.floor(v + 0.5)) writes it, or -1 */
static int value_of(const double *asked, span_t name, char *out)
{
	int i;
	for (i = 0; i < 5; i++) {
		if (span_is(name, ASKED[i]) && !absent(asked[i])) {
			double v = floor(asked[i] + 0.5);
			/* Lua 5.1 casts to long; out of range, this CPU gives LONG_MIN, and so does Lua here */
			long l = v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? (long) v : (long) INT64_MIN;
			return sprintf(out, "%ld", l);
		}
	}
	return -1;
}

/* Every "{name}" of `p` replaced: by its value, else by `missing` (then `*gone` is set) */
static void names(text_t *out, const char *p, const char *end, const double *asked, const char *missing,
		  bool *gone)
{
	char value[32];
	span_t name;
	size_t n;
	while (p < end) {
		if ((n = name_at(p, end, &name))) {
			int len = value_of(asked, name, value);
			if (len < 0)
				*gone = true;
			put(out, len < 0 ? missing : value, len < 0 ? strlen(missing) : (size_t) len);
			p += n;
		} else {
			put(out, p++, 1);
		}
	}
}

/* For each "[" of `p` (`n` bytes), the offset of the "]" that balances it (what Lua's "%b[]" matches from there),
 * else 0, in one pass with a stack (cache.lua's balancing()); NULL when memory runs out */
static size_t *balancing(const char *p, size_t n)
{
	size_t *close = calloc(n + 1, sizeof(size_t)), *open = malloc((n + 1) * sizeof(size_t)), depth = 0, i;
	if (!close || !open) {
		free(close);
		free(open);
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (p[i] == '[')
			open[depth++] = i;
		else if (p[i] == ']' && depth)
			close[open[--depth]] = i;
	free(open);
	return close;
}

/* cache.lua's jobaware_fill(): first each balanced "[...]" (Lua's "%b[]") becomes its words with the values filled
 * in, or nothing when it names a value the job does not state; then each "{name}" left becomes its value or "?".
 * Linear in the advice (a scan from every "[" to its balance would be quadratic in a run of them). */
static void fill(text_t *out, span_t advice, const double *asked)
{
	text_t first = {NULL, 0, 0, false};
	const char *p = advice.p, *end = advice.p + advice.n;
	size_t *balance = balancing(advice.p, advice.n);
	bool gone;
	if (!balance) {
		out->failed = true;
		return;
	}
	while (p < end) {
		const char *close = *p == '[' && balance[p - advice.p] ? advice.p + balance[p - advice.p] : NULL;
		if (close) {
			text_t words = {NULL, 0, 0, false};
			gone = false;
			names(&words, p + 1, close, asked, "", &gone);
			if (!gone && words.n)
				put(&first, words.p, words.n);
			first.failed |= words.failed;
			free(words.p);
			p = close + 1;
		} else {
			put(&first, p++, 1);
		}
	}
	if (first.n)
		names(out, first.p, first.p + first.n, asked, "?", &gone);
	out->failed |= first.failed;
	free(first.p);
	free(balance);
}

/* cli_filter.lua's number(): the leading digits ("^%d+"), else ABSENT */
static double leading_number(const char *text)
{
	size_t n = text ? strspn(text, "0123456789") : 0;
	return n ? number_of(text, n) : ABSENT;
}

/* cli_filter.lua's mebibytes(): "500", "500M", "2G", "1T", "4096K" -> MiB ("^(%d+%.?%d*)([KkMmGgTt]?)") */
static double mebibytes(const char *text)
{
	size_t n = text ? strspn(text, "0123456789") : 0;
	double scale = 1;
	if (n == 0)
		return ABSENT;
	if (text[n] == '.')
		n += 1 + strspn(text + n + 1, "0123456789");
	switch (text[n]) {
	case 'K': case 'k': scale = 1.0 / 1024; break;
	case 'G': case 'g': scale = 1024; break;
	case 'T': case 't': scale = 1024.0 * 1024; break;
	}
	return number_of(text, n) * scale;
}

/* cache.lua's jobaware_gpus(): the GPUs of a TRES/GRES string such as "gres:gpu:2" or "gpu:1,gres:shard:2" */
static double gpus_of(const char *tres)
{
	double total = 0;
	const char *item = tres;
	while (*item) {
		size_t n = strcspn(item, ",");
		if (n && memmem(item, n, "gpu", 3)) {
			size_t digits = 0;  /* ":(%d+)$": the digits that end the item, after a colon */
			while (digits < n && item[n - 1 - digits] >= '0' && item[n - 1 - digits] <= '9')
				digits++;
			total += digits && digits < n && item[n - 1 - digits] == ':'
				? number_of(item + n - digits, digits) : 1;
		}
		item += n + (item[n] == ',');
	}
	return total;
}

static double or_else(double value, double otherwise)
{
	return absent(value) ? otherwise : value;
}

/* cli_filter.lua's shape_of(): what the job asks for (`asked`) and its shape buckets (`query`), from the options */
static void shape_of(char *const *o, double *asked, double *query)
{
	enum { TIME, NODES_OPT, NTASKS, PER_NODE, PER_TASK, MEM, MEM_PER_CPU, GRES, GPUS_PER_NODE, GPUS_OPT };
	double ntasks, per_node, per_cpu;
	int i, minutes = o[TIME] ? slurm_time_str2mins(o[TIME]) : 0;
	asked[TIME_MINUTES] = minutes > 0 ? (double) minutes : ABSENT;
	asked[NODES] = or_else(leading_number(o[NODES_OPT]), 1);
	ntasks = fmax(or_else(leading_number(o[NTASKS]), 1), 1);
	per_node = leading_number(o[PER_NODE]);
	if (!absent(per_node) && per_node > 0)
		ntasks = fmax(ntasks, per_node * asked[NODES]);
	asked[CPUS] = ntasks * fmax(or_else(leading_number(o[PER_TASK]), 1), 1);
	asked[MEM_MIB] = mebibytes(o[MEM]);
	per_cpu = mebibytes(o[MEM_PER_CPU]);
	if (absent(asked[MEM_MIB]) && !absent(per_cpu))
		asked[MEM_MIB] = per_cpu * ceil(asked[CPUS] / fmax(asked[NODES], 1));
	asked[GPUS] = o[GRES] ? gpus_of(o[GRES])
		: or_else(leading_number(o[GPUS_PER_NODE]), or_else(leading_number(o[GPUS_OPT]), 0));
	for (i = 0; i < 5; i++)
		query[i] = bucket(asked[i]);
}

/* Slurm's options the advice reads: those of shape_of() in its order, then the partition and the account */
static const char *const OPTIONS[] = {"time", "nodes", "ntasks", "ntasks-per-node", "cpus-per-task", "mem",
				      "mem-per-cpu", "gres", "gpus-per-node", "gpus", "partition", "account"};
#define N_OPTIONS (sizeof(OPTIONS) / sizeof(OPTIONS[0]))

/* The command, as the Lua host names it: slurm_opt_t starts with pointers to the options of salloc, sbatch,
 * scrontab and srun (src/common/slurm_opt.h), of which the running command sets its own. A guard against a Slurm
 * whose struct starts otherwise: where the program runs under one of those names, the two must agree (else no
 * advice) */
static const char *command_of(const slurm_opt_t *opt)
{
	static const char *const names[] = {"salloc", "sbatch", "scrontab", "srun"};
	const char *program = program_invocation_short_name, *command = "other";
	void *heads[4];
	int i;
	memcpy(heads, opt, sizeof(heads));
	for (i = 3; i >= 0; i--)
		if (heads[i])
			command = names[i];  /* the first one set, as the Lua host tests them */
	for (i = 0; i < 4; i++)
		if (strcmp(program, names[i]) == 0 && strcmp(program, command) != 0)
			return "other";
	return command;
}

/* Whose verdicts: $USER or $LOGNAME, else "#UID" (the adapter links PATH.users/#UID.tsv to the user's file) */
static const char *user_name(char *uid)
{
	const char *name = getenv("USER");
	if (!name)
		name = getenv("LOGNAME");
	if (name && *name)
		return name;
	sprintf(uid, "#%u", (unsigned) getuid());
	return uid;
}

/* cli_filter.lua's advise(): the cached advice for jobs like this one, filled in, on stderr */
static void advise(slurm_opt_t *opt)
{
	const char *kind = command_of(opt), *user;
	char *o[N_OPTIONS] = {NULL}, *body = NULL, uid[16];
	double asked[5], query[5];
	header_t h;
	span_t partition, advice;
	time_t now = time(NULL);
	size_t i;
	bool oversized = false;
	if (strcmp(kind, "srun") == 0 && getenv("SLURM_JOB_ID"))
		return;  /* a step inside a job: no advice */
	if (strcmp(kind, "sbatch") != 0 && strcmp(kind, "salloc") != 0 && strcmp(kind, "srun") != 0)
		return;
	if (!load(&h, now))
		return;
	user = user_name(uid);
	for (i = 0; i < N_OPTIONS; i++)
		if ((o[i] = slurm_option_get(opt, OPTIONS[i])) && strnlen(o[i], SLURM_MAX + 1) > SLURM_MAX)
			oversized = true;
	partition.p = o[10] ? o[10] : h.default_partition;  /* the first of a list */
	partition.n = oversized ? 0 : strcspn(partition.p, ",");
	if (partition.n) {
		span_t account = {o[11] ? o[11] : "", o[11] ? strlen(o[11]) : 0};
		shape_of(o, asked, query);
		if (lookup(&h, user, account, partition, query, now, &body, &advice) && advice.n) {
			text_t line = {NULL, 0, 0, false};
			put(&line, "jobaware: ", 10);
			fill(&line, advice, asked);
			put(&line, "\n", 1);
			if (!line.failed)
				fwrite(line.p, 1, line.n, stderr);
			free(line.p);
		}
	}
	free(body);
	for (i = 0; i < N_OPTIONS; i++)
		slurm_xfree((void **) &o[i]);
}

/* ---- the plugin */

int init(void)
{
	return SLURM_SUCCESS;
}

int fini(void)
{
	return SLURM_SUCCESS;
}

int cli_filter_p_setup_defaults(slurm_opt_t *opt, bool early)
{
	(void) opt;
	(void) early;
	return SLURM_SUCCESS;
}

int cli_filter_p_pre_submit(slurm_opt_t *opt, int offset)
{
	(void) offset;
	advise(opt);
	return SLURM_SUCCESS;
}

void cli_filter_p_post_submit(int offset, uint32_t jobid, uint32_t stepid)
{
	(void) offset;
	(void) jobid;
	(void) stepid;
}
