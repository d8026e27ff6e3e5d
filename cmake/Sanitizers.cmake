# -DRDMA_EXPORTER_SANITIZE=address,undefined  or  =thread
if(RDMA_EXPORTER_SANITIZE)
  add_compile_options(-fsanitize=${RDMA_EXPORTER_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${RDMA_EXPORTER_SANITIZE})
endif()
