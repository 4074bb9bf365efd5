// A flag is a promise. Every flag in the table (arg.cpp) either does what its help says, or is
// listed here: refused at start-up until it is implemented, accepted with one warning line
// because it is a no-op by nature in Kiln, or a GPU placement flag that is ignored (with a
// warning) when there is no usable GPU. tests/test-arg-promises.cpp walks the whole table and
// fails for a flag that is neither used nor listed.
#pragma once

#include <string>

struct common_arg;

enum class common_flag_promise {
    unsupported,     // start-up fails: "X is not supported yet"
    no_op,           // one warning line, the flag does nothing (e.g. batching is always continuous)
    gpu_placement,   // without a usable GPU: "no usable GPU found, X ignored", the model runs on the CPU
};

struct common_flag_status {
    const char * flag;                  // the row's first name in the flag table
    common_flag_promise promise;
    const char * note;                  // why, for the message
    // gpu_placement only: whether this value asks for a GPU at all (null: every value does);
    // "-ngl 0" and "-ot exps=CPU" do not and are used as given.
    bool (*asks_for_gpu)(const std::string & value) = nullptr;
};

// The entry for a flag of the table, or null when the flag is implemented.
const common_flag_status * common_flag_promise_of(const common_arg & arg);

// Whether the build and the machine have a GPU the model could be placed on.
bool common_gpu_available();
