// Fault points around every RocksDB write Milvus makes, without touching Milvus or its
// binding: this file defines the RocksDB C API's write functions in the driver's own
// executable. The linker binds the binding's calls (gorocksdb's cgo stubs) to these
// definitions, which announce a point, call the real function from librocksdb.so (found with
// dlsym(RTLD_NEXT)), and announce a second point. See README.md, "Fault points".
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "rocksdb/c.h"
#include "_cgo_export.h"

static void *rmqsim_real(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "rmqsim-milvus: dlsym(RTLD_NEXT, %s) found nothing\n", name);
        abort();
    }
    return f;
}

#define RMQSIM_REAL(fn, type)                       \
    static type real_##fn = NULL;                   \
    if (real_##fn == NULL) {                        \
        real_##fn = (type)rmqsim_real(#fn);         \
    }

typedef void (*write_t)(rocksdb_t *, const rocksdb_writeoptions_t *, rocksdb_writebatch_t *,
                        char **);
void rocksdb_write(rocksdb_t *db, const rocksdb_writeoptions_t *options,
                   rocksdb_writebatch_t *batch, char **errptr) {
    RMQSIM_REAL(rocksdb_write, write_t);
    rmqsimWrite(db, 0, 0);
    real_rocksdb_write(db, options, batch, errptr);
    rmqsimWrite(db, 1, errptr != NULL && *errptr != NULL);
}

typedef void (*put_t)(rocksdb_t *, const rocksdb_writeoptions_t *, const char *, size_t,
                      const char *, size_t, char **);
void rocksdb_put(rocksdb_t *db, const rocksdb_writeoptions_t *options, const char *key,
                 size_t keylen, const char *val, size_t vallen, char **errptr) {
    RMQSIM_REAL(rocksdb_put, put_t);
    rmqsimWrite(db, 0, 0);
    real_rocksdb_put(db, options, key, keylen, val, vallen, errptr);
    rmqsimWrite(db, 1, errptr != NULL && *errptr != NULL);
}

typedef void (*put_cf_t)(rocksdb_t *, const rocksdb_writeoptions_t *,
                         rocksdb_column_family_handle_t *, const char *, size_t, const char *,
                         size_t, char **);
void rocksdb_put_cf(rocksdb_t *db, const rocksdb_writeoptions_t *options,
                    rocksdb_column_family_handle_t *cf, const char *key, size_t keylen,
                    const char *val, size_t vallen, char **errptr) {
    RMQSIM_REAL(rocksdb_put_cf, put_cf_t);
    rmqsimWrite(db, 0, 0);
    real_rocksdb_put_cf(db, options, cf, key, keylen, val, vallen, errptr);
    rmqsimWrite(db, 1, errptr != NULL && *errptr != NULL);
}

typedef void (*delete_t)(rocksdb_t *, const rocksdb_writeoptions_t *, const char *, size_t,
                         char **);
void rocksdb_delete(rocksdb_t *db, const rocksdb_writeoptions_t *options, const char *key,
                    size_t keylen, char **errptr) {
    RMQSIM_REAL(rocksdb_delete, delete_t);
    rmqsimWrite(db, 0, 0);
    real_rocksdb_delete(db, options, key, keylen, errptr);
    rmqsimWrite(db, 1, errptr != NULL && *errptr != NULL);
}

typedef void (*delete_cf_t)(rocksdb_t *, const rocksdb_writeoptions_t *,
                            rocksdb_column_family_handle_t *, const char *, size_t, char **);
void rocksdb_delete_cf(rocksdb_t *db, const rocksdb_writeoptions_t *options,
                       rocksdb_column_family_handle_t *cf, const char *key, size_t keylen,
                       char **errptr) {
    RMQSIM_REAL(rocksdb_delete_cf, delete_cf_t);
    rmqsimWrite(db, 0, 0);
    real_rocksdb_delete_cf(db, options, cf, key, keylen, errptr);
    rmqsimWrite(db, 1, errptr != NULL && *errptr != NULL);
}

typedef void (*delete_range_cf_t)(rocksdb_t *, const rocksdb_writeoptions_t *,
                                  rocksdb_column_family_handle_t *, const char *, size_t,
                                  const char *, size_t, char **);
void rocksdb_delete_range_cf(rocksdb_t *db, const rocksdb_writeoptions_t *options,
                             rocksdb_column_family_handle_t *cf, const char *start_key,
                             size_t start_key_len, const char *end_key, size_t end_key_len,
                             char **errptr) {
    RMQSIM_REAL(rocksdb_delete_range_cf, delete_range_cf_t);
    rmqsimWrite(db, 0, 0);
    real_rocksdb_delete_range_cf(db, options, cf, start_key, start_key_len, end_key,
                                 end_key_len, errptr);
    rmqsimWrite(db, 1, errptr != NULL && *errptr != NULL);
}
