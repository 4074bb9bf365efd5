// /slots/{id}?action=save|restore|erase: a slot's cache to a file under --slot-save-path and back
// (llama_state_seq_save_file / _load_file), or emptied, in llama.cpp's request and response shapes.
#pragma once

#include "server-slots.h"
#include "server-utils.h"

#include <string>

// The directory of the slot files: created if missing; false with err naming it when it cannot be.
bool prepare_slot_save_dir(const std::string & dir, std::string & err);

// Runs the action on slot id (waiting until the slot is idle) and answers as llama.cpp does:
// save {"id_slot", "filename", "n_saved", "n_written", "timings": {"save_ms"}}, restore
// {"id_slot", "filename", "n_restored", "n_read", "timings": {"restore_ms"}}, erase {"id_slot",
// "n_erased"}. save_dir empty: save and restore are refused (501). Throws http_error: an unknown
// action, a filename that is not a plain file name (no directories, no "..": it stays inside
// save_dir), a busy or unknown slot, a file that cannot be read or was made by another model.
json run_slot_file_action(slot_engine & engine, const std::string & save_dir, const std::string & id_text,
                          const std::string & action, const json & body);
