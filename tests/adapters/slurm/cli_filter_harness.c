/*
 * Runs the compiled cli_filter (adapters/slurm/c/cli_filter_jobaware.c, linked in) outside Slurm, for the hostile
 * input tests and the fuzz run: it stands in for the few symbols of libslurm the filter uses, and is built with
 * AddressSanitizer and UndefinedBehaviorSanitizer by tests/adapters/slurm/test_plugins_hostile.py.
 *
 * Reads cases from stdin until its end. A case is a line "case N L", then N lines "OPTION=VALUE" (the options
 * sbatch would hand over; VALUE may hold anything but a line break), then L bytes that become the submitting
 * user's file (PATH.users/$USER.tsv; L = 0 leaves the file as it is). Each case calls cli_filter_p_pre_submit as
 * sbatch does; the filter's advice and notes go to stderr, then "end CPU_SECONDS" (the process's CPU time for the
 * call) to stdout and to stderr, so that each case's output can be told apart.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct slurm_opt slurm_opt_t;
int cli_filter_p_pre_submit(slurm_opt_t *opt, int offset);

#define MAX_OPTIONS 64
static char *names[MAX_OPTIONS], *values[MAX_OPTIONS];
static int n_options;

/* sbatch's option struct starts with pointers to the options of salloc, sbatch, scrontab and srun */
struct slurm_opt {
	void *salloc, *sbatch, *scrontab, *srun;
};

char *slurm_option_get(slurm_opt_t *opt, const char *name)
{
	int i;
	(void) opt;
	for (i = 0; i < n_options; i++)
		if (strcmp(names[i], name) == 0)
			return strdup(values[i]);
	return NULL;
}

void slurm_xfree(void **pointer)
{
	free(*pointer);
	*pointer = NULL;
}

/* Minutes from "MM" (digits only); -1 otherwise: Slurm's own parser is not under test here */
int slurm_time_str2mins(const char *text)
{
	size_t n = strspn(text, "0123456789");
	return n && n < 9 && !text[n] ? atoi(text) : -1;
}

static void said(const char *fmt, va_list args)
{
	fputs("sbatch: ", stderr);
	vfprintf(stderr, fmt, args);
	fputc('\n', stderr);
}

void slurm_info(const char *fmt, ...)
{
	va_list args;
	va_start(args, fmt);
	said(fmt, args);
	va_end(args);
}

void slurm_debug(const char *fmt, ...)
{
	(void) fmt;
}

/* A line of stdin without its line break, in a buffer that grows; NULL at the end */
static char *line(char **buffer, size_t *size)
{
	ssize_t n = getline(buffer, size, stdin);
	if (n <= 0)
		return NULL;
	if ((*buffer)[n - 1] == '\n')
		(*buffer)[n - 1] = '\0';
	return *buffer;
}

int main(void)
{
	char *buffer = NULL, user_file[4096];
	size_t size = 0;
	const char *user = getenv("USER");
	struct slurm_opt opt = {NULL, &opt, NULL, NULL};
	snprintf(user_file, sizeof(user_file), "%s.users/%s.tsv", JOBAWARE_CACHE_PATH, user ? user : "nobody");
	while (line(&buffer, &size)) {
		int n, i;
		long length;
		clock_t started;
		if (sscanf(buffer, "case %d %ld", &n, &length) != 2 || n < 0 || n > MAX_OPTIONS || length < 0)
			return 2;
		for (i = 0; i < n; i++) {
			char *eq;
			if (!line(&buffer, &size) || !(eq = strchr(buffer, '=')))
				return 2;
			*eq = '\0';
			names[i] = strdup(buffer);
			values[i] = strdup(eq + 1);
		}
		n_options = n;
		if (length) {
			char *text = malloc(length);
			FILE *f = fopen(user_file, "wb");
			if (!text || !f || fread(text, 1, length, stdin) != (size_t) length
			    || fwrite(text, 1, length, f) != (size_t) length)
				return 2;
			fclose(f);
			free(text);
		}
		started = clock();
		cli_filter_p_pre_submit(&opt, 0);
		fprintf(stderr, "end %.6f\n", (double) (clock() - started) / CLOCKS_PER_SEC);
		fflush(stderr);
		printf("end %.6f\n", (double) (clock() - started) / CLOCKS_PER_SEC);
		fflush(stdout);
		for (i = 0; i < n; i++) {
			free(names[i]);
			free(values[i]);
		}
	}
	free(buffer);
	return 0;
}
