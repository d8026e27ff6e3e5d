add_library(rdma_warnings INTERFACE)
target_compile_options(rdma_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers)
# -DRDMA_EXPORTER_WERROR=ON (for CI): a warning in the project's own code fails the build. Off by
# default, so that a newer compiler's new warnings never stop a user's build. Third-party headers
# are system headers (/usr/include, or SYSTEM) and do not count.
option(RDMA_EXPORTER_WERROR "Treat warnings in the project's own code as errors" OFF)
if(RDMA_EXPORTER_WERROR)
  target_compile_options(rdma_warnings INTERFACE -Werror)
endif()
