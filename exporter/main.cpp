#include "exporter/app.h"

int main(int argc, char** argv) { return rdma::exporter::run(argc, argv); }
