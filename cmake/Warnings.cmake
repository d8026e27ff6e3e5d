add_library(rdma_warnings INTERFACE)
target_compile_options(rdma_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers)
