// Request fields that constrain what the model may write: "grammar" (GBNF), "json_schema" and
// OpenAI's "response_format". Each becomes the GBNF grammar of the generation's sampler, so the
// slots only ever see one kind of constraint.
#pragma once

#include "common.h"
#include "server-utils.h"

// Sets sp.grammar from the request (keeping the --grammar default when the request has none).
// Throws http_error(400) naming the field: a grammar that does not parse (with line and
// column), a schema that cannot be converted, two constraints at once.
void parse_constraints(const json & body, common_params_sampling & sp);
