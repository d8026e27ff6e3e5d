# -DRDMA_EXPORTER_SANITIZE=address,undefined  or  =thread
if(RDMA_EXPORTER_SANITIZE)
  add_compile_options(-fsanitize=${RDMA_EXPORTER_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${RDMA_EXPORTER_SANITIZE})
  # libstdc++'s precondition checks (as Fedora/RHEL build flags turn them on): reading an
  # empty std::optional or indexing past a vector's end aborts in the tests instead of passing
  # silently, as neither sanitizer sees such a read of the object's own storage.
  add_compile_definitions(_GLIBCXX_ASSERTIONS)
endif()
