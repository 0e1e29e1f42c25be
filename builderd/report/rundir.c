#include "report/rundir.h"

#include "metrics_json.h"

#include "io/net.h"
#include "sys/afile.h"
#include "sys/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int rundir_begin(const char *dir, const char *end_doc, uint32_t run, const char *role,
		 uint32_t id)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		int rc = -errno;
		log_error("Cannot create the output folder %s: %s", dir, strerror(errno));
		return rc;
	}
	char path[AFILE_PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, end_doc);
	int rc = afile_remove(path);
	if (rc < 0) {
		log_error("Cannot remove the previous run's %s: %s", path, strerror(-rc));
		return rc;
	}
	char host[256], started[32];
	net_host_name(host, sizeof host);
	time_t now = time(NULL);
	struct tm tm;
	strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
	json_t *root = json_object();
	metrics_json_set(root, "state", metrics_json_text("running"));
	metrics_json_set(root, "run", metrics_json_u64(run));
	metrics_json_set(root, "role", metrics_json_text(role));
	metrics_json_set(root, "id", metrics_json_u64(id));
	metrics_json_set(root, "pid", metrics_json_u64((uint64_t)getpid()));
	metrics_json_set(root, "host", metrics_json_text(host));
	metrics_json_set(root, "started", metrics_json_text(started));
	metrics_json_set(root, "end_document", metrics_json_text(end_doc));
	snprintf(path, sizeof path, "%s/%s", dir, RUNDIR_MARKER);
	rc = metrics_json_write(path, root, JSON_INDENT(2));
	json_decref(root);
	return rc;
}

int rundir_end(const char *dir)
{
	char path[AFILE_PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, RUNDIR_MARKER);
	int rc = afile_remove(path);
	if (rc < 0)
		log_error("Cannot remove %s: %s", path, strerror(-rc));
	return rc;
}
