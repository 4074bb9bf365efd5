// Request fields of the samplers beyond the classic set: logit_bias (OpenAI's object of token
// ids, or llama.cpp's list of [token id or text, bias or false] pairs), DRY, XTC, top-n-sigma
// and mirostat. Bad values are a 400 naming the field.
#pragma once

#include "common.h"
#include "server-utils.h"

void parse_sampler_fields(const json & body, const llama_vocab * vocab, common_params_sampling & sp);
