// Subcommands of llama-gguf. Each takes the arguments after its name and returns the exit code.
#pragma once

int gguf_cmd_info(int argc, char ** argv);
int gguf_cmd_check(int argc, char ** argv);
int gguf_cmd_synth(int argc, char ** argv);
