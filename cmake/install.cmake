# install/export rules: filled in by the codegen work.
