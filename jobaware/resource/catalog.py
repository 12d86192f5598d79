"""What a call or an import says about the resource a script uses: the API catalogue behind the rich features.

A call is resolved to a dotted name through the script's imports and simple assignments
(`s = socket.socket()` makes `s.recv()` resolve to `socket.socket().recv`), then given a category by the
first rule that matches: (1) a rule on the dotted name (`numpy` + `zeros` -> alloc), (2) the method name
alone when it is distinctive (`fetchall` -> database, `recvfrom` -> socket), (3) the root module's
default category (`requests` -> http).
"""

from __future__ import annotations


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# (module prefix, function names or None for any, category): first match wins
QUALIFIED_RULES: list[tuple[str, frozenset[str] | None, str]] = [
    ("numpy", _names("load save savez savez_compressed loadtxt savetxt genfromtxt fromfile tofile fromregex"),
     "file_io"),
    ("numpy", _names("memmap"), "hdf_netcdf"),
    ("numpy", _names("""zeros ones empty full zeros_like ones_like empty_like full_like array asarray arange
                     linspace logspace geomspace meshgrid mgrid ogrid eye identity tile repeat concatenate stack
                     vstack hstack dstack column_stack outer kron fromfunction copy diag indices append insert
                     matrix asmatrix broadcast_to resize pad"""), "alloc"),
    ("numpy.random", None, "alloc"),
    ("numpy", None, "compute"),
    ("scipy.io", None, "hdf_netcdf"),
    ("scipy.sparse", None, "alloc"),
    ("scipy", None, "compute"),
    ("pandas", _names("""read_csv read_table read_excel read_json read_parquet read_pickle read_fwf read_feather
                      ExcelWriter read_html read_clipboard"""), "file_io"),
    ("pandas", _names("read_hdf HDFStore"), "hdf_netcdf"),
    ("pandas", _names("read_sql read_sql_query read_sql_table read_gbq"), "database"),
    ("pandas", None, "alloc"),
    ("torch.distributed", None, "mpi"),
    ("torch", _names("zeros ones empty rand randn randint tensor arange full zeros_like ones_like"), "alloc"),
    ("torch", None, "ml"),
    ("xarray", _names("open_dataset open_mfdataset open_dataarray load_dataset open_zarr"), "hdf_netcdf"),
    ("xarray", None, "alloc"),
    ("dask.array", None, "alloc"),
    ("dask", None, "multiproc"),
    ("builtins", _names("open file"), "file_io"),
    ("builtins", _names("list dict set sorted bytearray frozenset"), "container"),
    ("builtins", _names("pow divmod"), "compute"),
    ("builtins", _names("input raw_input"), "text"),
    ("io", _names("open FileIO"), "file_io"),
    ("os", _names("""listdir walk scandir remove unlink rename renames replace makedirs mkdir rmdir removedirs stat
                  open read write fsync truncate chmod chown link symlink utime"""), "file_io"),
    ("os.path", _names("getsize getmtime exists isfile isdir"), "file_io"),
    ("os", _names("fork system popen spawnl spawnv execv execl execvp kill wait waitpid"), "multiproc"),
    ("json", _names("load dump"), "file_io"),
    ("json", None, "text"),
    ("pickle", _names("load dump"), "file_io"),
    ("cPickle", _names("load dump"), "file_io"),
    ("pickle", None, "container"),
    ("cPickle", None, "container"),
    ("copy", None, "container"),
    ("collections", None, "container"),
    ("heapq", None, "container"),
    ("array", None, "container"),
    ("matplotlib.pyplot", _names("savefig imsave imread"), "file_io"),
    ("pathlib", None, "file_io"),
    ("subprocess", None, "multiproc"),
    ("itertools", _names("permutations combinations combinations_with_replacement product"), "compute"),
    ("urllib", _names("urlencode quote unquote quote_plus urlparse"), "text"),
    ("urllib.parse", None, "text"),
    ("sqlite3", None, "database"),
]

METHOD_CATEGORY: dict[str, str] = {
    **dict.fromkeys(_names("""read readline readlines write writelines writerow writerows to_csv to_excel to_json
                           to_parquet to_pickle to_feather savefig read_text write_text read_bytes write_bytes
                           flush seek truncate tofile"""), "file_io"),
    **dict.fromkeys(_names("to_netcdf to_hdf create_dataset create_group require_dataset to_zarr"), "hdf_netcdf"),
    **dict.fromkeys(_names("""recv recvfrom recv_into recvfrom_into sendto sendall accept listen setsockopt
                           getsockname getpeername gethostbyname settimeout"""), "socket"),
    **dict.fromkeys(_names("""urlopen urlretrieve raise_for_status iter_content get_object put_object upload_file
                           download_file find_all select_one"""), "http"),
    **dict.fromkeys(_names("""execute executemany fetchall fetchone fetchmany commit rollback cursor escape_string
                           insert_one insert_many find_one update_one delete_many"""), "database"),
    **dict.fromkeys(_names("""Get_rank Get_size Bcast bcast Scatter scatter Gather gather Allreduce allreduce Reduce
                           Barrier barrier Isend Irecv Send Recv Sendrecv Allgather allgather alltoall Alltoall
                           Scatterv Gatherv Allgatherv"""), "mpi"),
    **dict.fromkeys(_names("""map_async apply_async starmap starmap_async imap imap_unordered submit as_completed
                           join_thread"""), "multiproc"),
    **dict.fromkeys(_names("append extend insert setdefault update add appendleft deepcopy"), "container"),
    **dict.fromkeys(_names("""split strip rstrip lstrip replace lower upper join format encode decode startswith
                           endswith find rfind splitlines count"""), "text"),
    **dict.fromkeys(_names("plot scatter imshow hist bar contour pcolormesh subplot subplots figure"), "plot"),
    **dict.fromkeys(_names("dot matmul inv solve eig eigh svd fft ifft integrate odeint quad solve_ivp"), "compute"),
    **dict.fromkeys(_names("fit predict fit_transform transform train evaluate"), "ml"),
}

ROOT_CATEGORY: dict[str, str] = {
    **dict.fromkeys(_names("math cmath statistics random sympy numba mpmath decimal fractions"), "compute"),
    **dict.fromkeys(_names("""csv shutil glob fnmatch gzip bz2 lzma zipfile tarfile shelve marshal fileinput
                           tempfile imageio PIL cv2 openpyxl xlrd xlwt docx PyPDF2 yaml configparser"""), "file_io"),
    **dict.fromkeys(_names("""h5py tables netCDF4 netcdf4 zarr fitsio pyfits astropy cftime xarray pyhdf
                           h5netcdf"""), "hdf_netcdf"),
    **dict.fromkeys(_names("socket socketserver SocketServer select selectors ssl zmq asyncore"), "socket"),
    **dict.fromkeys(_names("""requests urllib urllib2 urllib3 http httplib httplib2 aiohttp httpx bs4
                           BeautifulSoup selenium scrapy tweepy wikipedia feedparser boto3 botocore boto google
                           googleapiclient paramiko ftplib smtplib imaplib poplib pycurl xmlrpc xmlrpclib websocket
                           websockets slack slackclient slack_sdk flask django tornado bottle fastapi uvicorn
                           twisted mechanize suds zeep grpc pika kafka paho telegram discord qualtrics
                           google_auth_oauthlib oauth2client newspaper praw github"""), "http"),
    **dict.fromkeys(_names("""MySQLdb pymysql mysql psycopg2 pymongo redis sqlalchemy cx_Oracle pyodbc sqlite3
                           peewee cassandra elasticsearch pymssql mongoengine influxdb neo4j"""), "database"),
    **dict.fromkeys(_names("mpi4py horovod"), "mpi"),
    **dict.fromkeys(_names("""multiprocessing concurrent threading thread _thread joblib ray dask parsl ipyparallel
                           pathos schwimmbad celery queue"""), "multiproc"),
    **dict.fromkeys(_names("""matplotlib pylab seaborn plotly bokeh vpython visual turtle tkinter Tkinter pygame
                           graphviz networkx"""), "plot"),
    **dict.fromkeys(_names("""sklearn tensorflow keras torch xgboost lightgbm nltk gensim textblob spacy transformers
                           theano"""), "ml"),
    **dict.fromkeys(_names("re string textwrap difflib unicodedata codecs"), "text"),
    **dict.fromkeys(_names("numpy scipy"), "compute"),
    **dict.fromkeys(_names("pandas"), "alloc"),
}


def call_category(qualified: list[str]) -> str | None:
    """The category of a call from its resolved dotted parts (['numpy', 'linalg', 'inv'], ['?', 'recv'])."""
    parts = [p.removesuffix("()") for p in qualified]
    if len(parts) < 2 or parts[0] == "local":
        return None
    function, module = parts[-1], ".".join(parts[:-1])
    if parts[0] != "?":
        for prefix, functions, category in QUALIFIED_RULES:
            if (module == prefix or module.startswith(prefix + ".")) and (functions is None or function in functions):
                return category
    if function in METHOD_CATEGORY:
        return METHOD_CATEGORY[function]
    return ROOT_CATEGORY.get(parts[0])


def module_category(module: str) -> str | None:
    """The category of an imported module, by its top-level package."""
    return ROOT_CATEGORY.get(module.split(".")[0])
