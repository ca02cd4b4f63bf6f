/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum http-token [--rotate] [--json]`: shows gpumd's REST API bearer token, or replaces it
 * with a fresh random one (gpumd writes the token file, mode 0600, and uses the new token at
 * once; the old one stops working). Asks gpumd over its socket (protocol op "http_token"), so
 * only an admin (root or admin_group) may.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <gpum/error.h>

#include "args.h"
#include "cli.h"
#include "client_cli.h"

enum { OPT_ROTATE = 1, OPT_JSON };

static const cli_arg_t token_args[] = {
    {OPT_ROTATE, "--rotate", 0, NULL,
     "replace the token with a fresh random one (the old one stops working at once) and print "
     "the new one",
     0},
    {OPT_JSON, "--json", 0, NULL, "print {\"token\", \"token_file\", \"rotated\"}", 0},
    {0},
};

static const cli_cmd_spec_t token_spec = {
    .name = "http-token",
    .usage = "[--rotate] [--json]",
    .summary = "Show or rotate the bearer token of gpumd's REST API.",
    .text = "Send it as 'Authorization: Bearer TOKEN' (docs/rest.md). Only root or a member of\n"
            "admin_group may.",
    .args = token_args,
    .examples = "T=$(gpum http-token)\n"
                "curl -H \"Authorization: Bearer $T\" http://127.0.0.1:8642/api/v1/gpu/status\n"
                "gpum http-token --rotate",
    .exit_status = "0 on success, 1 when gpumd refused (not an admin, HTTP off) or is not "
                   "running, 2 for usage errors.",
};

int cmd_http_token(gpum_config_t *cfg, int argc, char **argv) {
  bool rotate = false, as_json = false;
  cli_args_t p;
  cli_args_init(&p, &token_spec, argc, argv);
  for (int id; (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    const char *v = p.value;
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      return cli_args_error(&token_spec, "unexpected argument '%s'", v);
    case OPT_ROTATE:
      rotate = true;
      break;
    case OPT_JSON:
      as_json = true;
      break;
    }
  }
  gpum_client_t *c = NULL;
  int code = cli_client_connect(cfg, "http-token", 0, &c);
  if (code != 0)
    return code;
  char *reply = NULL;
  int rc = gpum_client_call_json(c, "http_token", rotate ? "{\"rotate\": true}" : NULL, &reply);
  gpum_client_close(c);
  if (rc != 0) {
    fprintf(stderr, "gpum http-token: %s\n", cli_reason(rc));
    return CLI_EXIT_FAIL;
  }
  json_t *j = json_loads(reply, 0, NULL);
  const char *tok = json_string_value(json_object_get(j, "token"));
  if (!tok) {
    fprintf(stderr, "gpum http-token: gpumd sent no token\n");
    code = CLI_EXIT_FAIL;
  } else if (as_json) {
    json_t *o = json_pack("{s:s, s:O?, s:b}", "token", tok, "token_file",
                          json_object_get(j, "token_file"), "rotated", rotate);
    char *text = o ? json_dumps(o, 0) : NULL;
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(o);
  } else {
    printf("%s\n", tok);
    if (rotate)
      fprintf(stderr, "gpum http-token: rotated; the new token is in %s\n",
              json_string_value(json_object_get(j, "token_file")));
  }
  json_decref(j);
  free(reply);
  return code;
}
